"""Tree-LSTM classifiers of SST parse trees, labels on every node: the :class:`TreeTask`.

* Batches: :class:`IndexedTrees`, trees lowered by one
  :class:`~arc_jax.perturbation.trees.TreeBatchBuilder` for the experiment's tree space, every
  tree padded to one node count N (the bucket of the largest tree of the data, plus 2 nodes per
  Dup budget), so the steps compile once per number of schedule steps (a few powers of two).
* Losses (:mod:`arc_jax.train.losses`): clean = mean cross-entropy over every labelled node;
  ARC robust = cross-entropy on every labelled node's worst-case logits (the DP bounds each
  node's logits over every tree its subtree becomes); ``(1 − λ)·clean + λ·robust``.
* Metrics per example are the root's: correct = root prediction equals the root label,
  certified = root certified (:class:`~arc_jax.certify.Certificate` with a node axis).
* EX enumerates S(t) exactly (:meth:`~arc_jax.perturbation.trees.TreeSpace.enumerate`); HF and
  HotFlip adversarial training search S(t) with :mod:`arc_jax.attacks.tree_hotflip`; data
  augmentation draws uniformly over application choices
  (:func:`~arc_jax.attacks.sample_tree_member`); both carry node labels over.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from arc_jax import interval, parallel
from arc_jax.attacks import (ExhaustiveResult, HotFlipResult, exhaustive_tree_robustness,
                             sample_tree_member, tree_adversarial_examples,
                             tree_hotflip_robustness)
from arc_jax.certify.tree_dp import certify_tree_model
from arc_jax.data import ExperimentData, Tree, batch_order, prepare_tree_data
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.padding import NODE_BUCKETS, bucket
from arc_jax.perturbation import data_space
from arc_jax.perturbation.trees import (SUB, TreeBatch, TreeBatchBuilder, TreeSignature,
                                        TreeSpace, tree_space)
from arc_jax.train import losses
from arc_jax.train.steps import RowMetrics
from arc_jax.train.tasks.base import Task, largest_synonym_list

SST_CLASSES = 5


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class IndexedTrees:
  """A batch of trees and where its rows come from.

  Attributes:
    trees: B trees padded to N nodes (padding rows have ``num_nodes`` 0 and labels -1).
    indices: int32 (B,), position of each row in its split, -1 for padding rows.
  """

  trees: TreeBatch
  indices: np.ndarray


def _root_rows(trees: TreeBatch, node_logits: jax.Array,
               certified: jax.Array | None = None) -> RowMetrics:
  """Per-tree metrics from the root's logits (B, N, K) → (B, K)."""
  rows = jnp.arange(node_logits.shape[0])
  root = jnp.maximum(jnp.asarray(trees.num_nodes) - 1, 0)
  correct = jnp.argmax(node_logits[rows, root], axis=-1) == jnp.asarray(trees.labels)[rows, root]
  return RowMetrics((jnp.asarray(trees.num_nodes) > 0).astype(jnp.float32), correct, certified)


def clean_objective(model: TreeLSTMClassifier, batch: IndexedTrees, dropout_key, step):
  """Cross-entropy of the concrete forward pass over every labelled node."""
  del step
  logits = model(batch.trees, dropout_key)
  return losses.node_cross_entropy(logits, batch.trees.labels), _root_rows(batch.trees, logits)


def classify_rows(model: TreeLSTMClassifier, batch: IndexedTrees) -> RowMetrics:
  """Root correctness of the concrete forward pass without dropout."""
  return clean_objective(model, batch, None, None)[1]


@functools.cache
def arc_objective(signature: TreeSignature, robust_weight: optax.Schedule, eps: optax.Schedule,
                  robust_loss: str):
  """ARC's objective on every labelled node from one DP call (:func:`certify_tree_model`: its
  clean logits are the unperturbed trees' under the same dropout masks).

  Args:
    signature: the tree space's signature (static).
    robust_weight, eps: schedules of λ and ε.
    robust_loss: ``"worst_case"`` (the only loss defined for 5 classes).
  """
  if robust_loss != "worst_case":
    raise ValueError(f"robust_loss={robust_loss!r} is binary only; Tree-LSTMs (5 classes) train "
                     "with robust_loss='worst_case'.")

  def objective(model: TreeLSTMClassifier, batch: IndexedTrees, dropout_key, step):
    trees = batch.trees
    # Surrogate bounds (no outward rounding); reported certificates are certify_rows' (sound).
    cert = certify_tree_model(model, signature, trees, trees.labels, eps(step), dropout_key,
                              domain=interval.UNROUNDED)
    clean = losses.node_cross_entropy(cert.clean_logits, trees.labels)
    robust = losses.node_cross_entropy(cert.worst_case_logits, trees.labels)
    return (losses.arc_loss(clean, robust, robust_weight(step)),
            _root_rows(trees, cert.clean_logits, cert.certified))

  return objective


@functools.cache
def certify_rows(signature: TreeSignature, join: str = "after_cell"):
  """Root correctness and root certificate at ε = 1, from one DP pass without dropout (``join``:
  :data:`~arc_jax.certify.tree_dp.JOINS`)."""
  def rows(model: TreeLSTMClassifier, batch: IndexedTrees) -> RowMetrics:
    trees = batch.trees
    cert = certify_tree_model(model, signature, trees, trees.labels, join=join)
    return _root_rows(trees, cert.clean_logits, cert.certified)

  return rows


@functools.partial(jax.jit, static_argnums=0)
def _root_logits(graphdef: nnx.GraphDef, state: nnx.State, trees: TreeBatch) -> jax.Array:
  """Evaluation-mode logits (B, K) of every tree's root."""
  logits = nnx.merge(graphdef, state)(trees)
  return logits[jnp.arange(logits.shape[0]), jnp.maximum(trees.num_nodes - 1, 0)]


class TreeTask(Task):
  """Tree-LSTM on SST trees (see the module docstring)."""

  name = "tree_lstm"
  datasets = ("sst_trees",)
  robust_losses = ("worst_case",)
  trainable_embeddings = True
  metrics = ("acc", "cf", "ex", "hf")

  check_space = staticmethod(tree_space)

  def prepare_data(self, config: ml_collections.ConfigDict) -> ExperimentData:
    return prepare_tree_data(synonyms=config.synonyms,
                             max_candidates=config.max_candidates or None,
                             data_root=config.data_dir)

  def space(self, data: ExperimentData, spec: str) -> TreeSpace:
    return tree_space(data_space(data, spec))

  def builder(self, data: ExperimentData, space: TreeSpace) -> TreeBatchBuilder:
    largest = max(t.num_nodes for trees in data.splits.values() for t in trees)
    nodes = bucket(largest + space.signature.added_nodes, NODE_BUCKETS)
    slots = largest_synonym_list(data) if space.signature.axis(SUB) is not None else 1
    return TreeBatchBuilder(data.vocab, space, min_substitutes=slots, node_buckets=(nodes,))

  def model(self, config: ml_collections.ConfigDict, data: ExperimentData) -> TreeLSTMClassifier:
    return TreeLSTMClassifier(data.embeddings, hidden=config.hidden, num_classes=SST_CLASSES,
                              dropout_rate=config.dropout_rate,
                              trainable_embeddings=config.trainable_embeddings,
                              rngs=nnx.Rngs(config.seed))

  def _lower(self, builder: TreeBatchBuilder, trees: Sequence[Tree], indices: Sequence[int],
             batch_size: int) -> IndexedTrees:
    return IndexedTrees(builder.build(trees, batch_size),
                        np.asarray(list(indices) + [-1] * (batch_size - len(trees)), np.int32))

  def batches(self, experiment, split: str, batch_size: int, *, certify: bool,
              shuffle: bool = False, seed: int = 0, epoch: int = 0, start: int = 0):
    """As :meth:`Task.batches`; every batch is lowered for the space (``certify`` or not), so
    clean and certified steps share one batch structure."""
    del certify
    trees = experiment.splits[split]
    order = batch_order([t.num_nodes for t in trees], batch_size, seed=seed, epoch=epoch,
                        shuffle=shuffle)
    for indices in order[start:]:
      yield self._lower(experiment.builder, [trees[i] for i in indices], indices, batch_size)

  def put(self, batch: IndexedTrees, mesh: Mesh) -> IndexedTrees:
    return IndexedTrees(parallel.put_trees(batch.trees, mesh),
                        parallel.put(batch.indices, parallel.batch_sharded(mesh)))

  def doubled(self, experiment, batch: IndexedTrees,
              partners: Callable[[list, np.ndarray], Sequence]) -> IndexedTrees:
    train = experiment.splits["train"]
    trees = [train[i] for i in batch.indices[batch.indices >= 0]]
    members = trees + list(partners(trees, np.array([t.label for t in trees], np.int32)))
    return self._lower(experiment.builder, members, range(len(members)), 2 * len(batch.indices))

  @staticmethod
  def sample_members(space: TreeSpace, trees: list[Tree], rng: np.random.Generator
                     ) -> list[Tree]:
    return [sample_tree_member(space, tree, rng) for tree in trees]

  clean_objective = staticmethod(clean_objective)
  arc_objective = staticmethod(arc_objective)
  classify_rows = staticmethod(classify_rows)
  certify_rows = staticmethod(certify_rows)

  @staticmethod
  def _root_predictor(experiment, params: nnx.State) -> Callable[[TreeBatch], np.ndarray]:
    """``(batch) -> root logits (B, K)`` of the model with ``params``, rows split over the mesh."""
    graphdef, state = nnx.split(nnx.merge(experiment.graphdef, params, experiment.rest))

    def predict_root_logits(trees: TreeBatch) -> np.ndarray:
      logits = _root_logits(graphdef, state, parallel.put_trees(trees, experiment.mesh))
      return multihost_utils.process_allgather(logits, tiled=True)

    return predict_root_logits

  def exhaustive(self, experiment, params: nnx.State, split: str, certified: np.ndarray, *,
                 shortcut: bool, batch_size: int, progress: bool) -> ExhaustiveResult:
    return exhaustive_tree_robustness(self._root_predictor(experiment, params),
                                      experiment.space, experiment.splits[split],
                                      experiment.builder, certified=certified,
                                      shortcut=shortcut, batch_size=batch_size,
                                      progress=progress)

  def hotflip(self, experiment, params: nnx.State, split: str, *, beam: int, batch_size: int,
              progress: bool) -> HotFlipResult:
    return tree_hotflip_robustness(experiment.graphdef, (params, experiment.rest),
                                   experiment.space, experiment.splits[split],
                                   experiment.builder, self._root_predictor(experiment, params),
                                   beam=beam, batch_size=batch_size, progress=progress,
                                   mesh=experiment.mesh)

  def adversarial_examples(self, experiment, params: nnx.State, examples: list,
                           labels: np.ndarray) -> list:
    del labels  # each tree's root label
    return tree_adversarial_examples(experiment.graphdef, (params, experiment.rest),
                                     experiment.space, examples, experiment.builder,
                                     batch_size=experiment.config.batch_size,
                                     mesh=experiment.mesh)

  def space_sizes(self, experiment, split: str) -> list[int]:
    return [experiment.space.count(t) for t in experiment.splits[split]]

  def empty_examples(self, split_data) -> dict[str, Any]:
    return {"indices": [], "policy": "leaves without vectors keep zero vectors, so no tree is "
                                     "empty"}
