"""Certification of the Tree-LSTMs (:class:`~arc_jax.nn.tree_models.TreeLSTMClassifier`): the
one-call :func:`certify_trees` over :class:`~arc_jax.data.Tree`\\ s, which lowers them with a
:class:`~arc_jax.perturbation.trees.TreeBatchBuilder` for the tree space and reads the
certificates of the tree DP (:func:`~arc_jax.certify.tree_dp.certify_tree_model`) at the roots.

Importing this module registers the family with the generic entry points of
:mod:`arc_jax.certify.api`: :func:`~arc_jax.certify.tree_dp.certify_tree_model` with
:func:`~arc_jax.certify.api.certify_model` (its options ``budgets`` and ``join``; ``join`` is one
of :data:`~arc_jax.certify.api.STATIC_OPTIONS`), :func:`certify_trees` with
:func:`~arc_jax.certify.api.certify`, and the size of the DP's state for
:func:`~arc_jax.certify.api.check_grid` (the package :mod:`arc_jax.certify` imports it)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from flax import nnx

from arc_jax import domains
from arc_jax import interval as iv
from arc_jax.certify import api
from arc_jax.certify.api import (MAX_GRID_SLOTS, certify, certify_batches, certify_jit,
                                 certify_model, check_examples, check_grid, check_inputs,
                                 grid_states)
from arc_jax.certify.certificate import CertifyResult
from arc_jax.certify.tree_dp import certify_tree_model, check_domain
from arc_jax.data.trees import Tree
from arc_jax.domain import Domain
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation.spaces import Space
from arc_jax.perturbation.trees import TreeBatchBuilder, TreeSignature, TreeSpace, tree_space

certify_model.register(TreeLSTMClassifier, certify_tree_model)


@certify.register
def certify_trees(model: TreeLSTMClassifier, space: Space | TreeSpace, trees: Sequence[Tree],
                  labels: Sequence[int] | None, vocab: Mapping[str, int], *,
                  batch_size: int = 32, eps: float = 1.0, max_grid_slots: int = MAX_GRID_SLOTS,
                  domain: Domain | str = iv.SOUND, join: str = "after_cell") -> CertifyResult:
  """:func:`certify` for Tree-LSTMs: trees, certified at their roots.

  Restricts the space to ``vocab`` and maps it to a tree space (:func:`tree_space`), lowers the
  trees with a :class:`TreeBatchBuilder` for that space in batches sorted by size, and reads the
  certificates at the roots. Compiled functions are cached across calls of the same shapes.

  Args:
    model: the classifier.
    space: a string space of deletions, substitutions and duplications (``parse_space``), or a
      tree space.
    trees: :class:`~arc_jax.data.Tree` (post-order; ``from_nested`` or the SST loaders).
    labels: root labels (n,); None: each tree's own root label.
    vocab: word → id; every leaf word must be in it.
    batch_size, eps, join, domain: as for :func:`~arc_jax.certify.tree_dp.certify_tree_model`
      (which refuses a domain it has no rules for, the linear-step domain).
    max_grid_slots: see :func:`certify`.
  """
  domain = domains.resolve(domain)
  check_inputs(model, space, vocab)
  check_domain(domain)
  num_classes = model.num_classes
  given = check_examples(trees, labels, num_classes, "tree",
                         "each an arc_jax.data.Tree, e.g. from_nested(('a', ('good', 'movie')))",
                         Tree)
  roots = given if given is not None else check_examples(
      trees, [t.labels[-1] for t in trees], num_classes, "tree", "labels=[...] (one per tree)",
      Tree)
  string_space = space.space if isinstance(space, TreeSpace) else space
  check_grid(tree_space(string_space).signature, string_space, batch_size, model.hidden,
             model.embeddings[...].itemsize, max_grid_slots)
  tspace = tree_space(string_space.restricted_to(vocab))
  builder = TreeBatchBuilder(vocab, tspace)
  graphdef, state = nnx.split(model)

  def lower(idx):
    batch = builder.build([trees[i] for i in idx], batch_size)
    node_labels = np.full(batch.shape, -1, np.int32)
    node_labels[np.arange(len(idx)), batch.num_nodes[:len(idx)] - 1] = roots[idx]
    return batch, node_labels

  return certify_batches(
      np.argsort([t.num_nodes for t in trees], kind="stable"), batch_size, lower,
      lambda batch, node_labels: certify_jit(graphdef, tspace.signature, state, batch,
                                             node_labels, eps, join=join,
                                             domain=domain).per_example())


@grid_states.register
def _tree_grid_states(sig: TreeSignature) -> int:
  """A merge step of the tree DP keeps the P ≈ C²/2^m split pairs of its C slots."""
  slots = int(np.prod(sig.grid))
  return slots * (slots + 1) // 2


api.moved_here(__name__, "certify_trees")
