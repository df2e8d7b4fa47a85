"""HotFlip beam search over tree spaces (HF Acc and HotFlip adversarial training for Tree-LSTMs).

The search of :mod:`arc_jax.attacks.hotflip` (same beam, same order of rounds, same distinct-
member rule, :class:`~arc_jax.attacks.hotflip.BeamSearch`) with the picks and scores of trees:

* A candidate is a set of *picks* (leaf, k, replacement) on the leaves of the **original** tree
  t, at most one per leaf and at most δ_k of T_k: an application choice of S(t)
  (:mod:`arc_jax.perturbation.trees`). Its tree is :func:`~arc_jax.perturbation.trees.
  rewrite_leaves` of the choice, with node labels carried over, so every tree returned is a
  member of S(t) by construction. A Del pick is offered only while the candidate keeps another
  leaf (the choice deleting every leaf is not in S(t)).
* Scores. A tree rewrite changes the structure, not only an input vector, so the first-order
  estimate is taken at the node whose state (h, c) the rewrite changes, in the candidate's
  current tree: with g = ∇_(h,c) L at that node (L the root's cross-entropy at the label),

      Sub   leaf n gets word w':         g_n · (leaf(w') − s_n)
      Dup   leaf n becomes (n, n):        g_n · (cell(s_n, s_n) − s_n)
      Del   leaf n goes, sibling m stays: g_p · (s_m − s_p), p the parent of n

  where s is a node's state and ``leaf``/``cell`` the Tree-LSTM's leaf and internal rules (the
  parent of a deleted leaf is replaced by its sibling). The node gradients come from one
  backward pass with zero offsets on every node's state
  (:meth:`~arc_jax.nn.tree_models.TreeLSTMClassifier.node_buffer`).

Batching: the beams of ``batch_size`` trees (sorted by size) advance together; each round makes
one jitted call on their unexpanded members (``batch_size · beam`` trees lowered by the family's
:class:`~arc_jax.perturbation.trees.TreeBatchBuilder`: one node count, so it compiles once per
rewrite kind and number of schedule steps) that returns the gains of every rewrite of that kind
at every leaf; the host gathers the picks' gains.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arc_jax.attacks.hotflip import (BeamSearch, Devices, HotFlipResult, Pick,
                                     check_search_settings, matches, merged, robustness,
                                     search_in_chunks)
from arc_jax.data.trees import Nested, Tree, to_nested
from arc_jax.nn.tree_models import flat_children
from arc_jax.perturbation.trees import (DEL, DUP, SUB, TreeBatch, TreeBatchBuilder, TreeSpace,
                                        leaf_result, rewrite_leaves)

PredictTreeFn = Callable[[TreeBatch], np.ndarray]


@dataclasses.dataclass(frozen=True)
class TreeHotFlipCandidate:
  """A member of S(t) found by the beam search.

  Attributes:
    tree: the tree, node labels carried over from t (its root keeps t's label).
    score: accumulated first-order estimate of its loss increase over t (0 for t itself).
    picks: the picks applied to t's leaves, by leaf index (``Pick.start``); each replacement is
      the string transformation's (``()`` Del, ``(w, w)`` Dup, ``(w',)`` Sub).
  """

  tree: Tree
  score: float
  picks: tuple[Pick, ...]


@dataclasses.dataclass
class _TreeMember:
  """A beam member and where t's leaves are in its tree.

  Attributes:
    candidate: the candidate.
    key: its tree as nested pairs (what makes two members the same).
    leaf_nodes: int (L,), the node of the candidate's tree holding each leaf of t that no pick
      rewrote; -1 where a pick did.
    expanded: expanded for the current transformation already.
  """

  candidate: TreeHotFlipCandidate
  key: Nested
  leaf_nodes: np.ndarray
  expanded: bool = False


def _tree_member(space: TreeSpace, tree: Tree, picks: tuple[Pick, ...], score: float
                 ) -> _TreeMember:
  leaves: list = list(tree.tokens)
  for pick in picks:
    leaves[pick.start] = leaf_result(space.kinds[pick.transformation], pick.replacement)
  member = rewrite_leaves(tree, leaves)  # not None: a Del pick always leaves another leaf
  nodes = [n for n, leaf in enumerate(member.leaf_index) if leaf >= 0]
  picked = {pick.start for pick in picks}
  leaf_nodes = np.full(len(leaves), -1, np.int64)
  position = 0  # leaves of the member, left to right
  for i, leaf in enumerate(leaves):
    if leaf is None:
      continue
    if i not in picked:
      leaf_nodes[i] = nodes[position]
    position += 1 if isinstance(leaf, str) else 2
  return _TreeMember(TreeHotFlipCandidate(member, score, picks), to_nested(member), leaf_nodes)


@functools.partial(jax.jit, static_argnums=(0, 2))
def _leaf_gains(graphdef: nnx.GraphDef, state: nnx.State, kind: str, trees: TreeBatch,
                labels: jax.Array) -> jax.Array:
  """First-order gains of the rewrite ``kind`` at every node (module docstring).

  Args:
    graphdef, state: a :class:`~arc_jax.nn.tree_models.TreeLSTMClassifier`.
    kind: ``"Sub"``, ``"Dup"`` or ``"Del"`` (static).
    trees: B trees padded to N nodes (lowered for the space: ``substitutes`` for Sub).
    labels: int (B,), the root labels.

  Returns:
    float (B, N, R) for Sub (per Sub slot of ``trees.substitutes``), else (B, N): the gain of
    the rewrite at each leaf (meaningless at internal nodes, padding and, for Del, a root).
  """
  model = nnx.merge(graphdef, state)
  rows, n_pad = trees.shape
  flat = jnp.arange(rows * n_pad)
  zeros = jnp.zeros((rows * n_pad + 1, model.hidden), model.embeddings[...].dtype)

  def loss(offsets):
    h, c = model.node_buffer(trees, offsets=offsets)
    root = jnp.arange(rows) * n_pad + jnp.maximum(trees.num_nodes - 1, 0)
    log_probs = jax.nn.log_softmax(model.logits(h[root], None))
    picked = jnp.take_along_axis(log_probs, labels[:, None], axis=1)[:, 0]
    return -jnp.sum(jnp.where(trees.num_nodes > 0, picked, 0.0)), (h, c)

  (g_h, g_c), (h, c) = jax.grad(loss, has_aux=True)((zeros, zeros))

  def gain(nodes, new_h, new_c):
    """g · (new − s) at ``nodes`` (any shape), new states broadcast against them."""
    extra = (1,) * (new_h.ndim - nodes.ndim - 1)
    at = lambda a: a[nodes].reshape(nodes.shape + extra + a.shape[-1:])
    return (jnp.sum(at(g_h) * (new_h - at(h)), -1) + jnp.sum(at(g_c) * (new_c - at(c)), -1))

  if kind == SUB:
    new_h, new_c = model.cell.leaf(jax.nn.relu(model.input_pre_activation(trees.substitutes,
                                                                          None)))
    return gain(flat.reshape(rows, n_pad), new_h, new_c)
  if kind == DUP:
    new_h, new_c = model.cell((h[:-1], c[:-1]), (h[:-1], c[:-1]))
    return gain(flat, new_h, new_c).reshape(rows, n_pad)
  left, right = (ids[:-1] for ids in flat_children(trees))  # B·N at leaves and padding
  deleted_left = gain(flat, h[right], c[right])  # the node becomes its right child
  deleted_right = gain(flat, h[left], c[left])
  out = jnp.zeros(rows * n_pad + 1, deleted_left.dtype)
  out = out.at[left].set(deleted_left).at[right].set(deleted_right)
  return out[:-1].reshape(rows, n_pad)


class _TreeSearch(BeamSearch):
  """The beam searches of one chunk of trees."""

  def __init__(self, graphdef, state, space: TreeSpace, trees: Sequence[Tree],
               builder: TreeBatchBuilder, beam: int, rows: int, devices: Devices):
    self.graphdef, self.state, self.space, self.builder = graphdef, state, space, builder
    self.trees, self.rows, self.devices = trees, rows, devices
    self.matches = [matches(space.space, t.tokens, builder.vocab) for t in trees]
    super().__init__(space.budgets, [[_tree_member(space, t, (), 0.0)] for t in trees], beam)

  def available(self, j: int, m: _TreeMember, k: int) -> np.ndarray:
    untouched = m.leaf_nodes[self.matches[j][k].starts] >= 0
    if self.space.kinds[k] == DEL:
      return untouched & (m.candidate.tree.num_nodes > 1)
    return untouched

  def scores(self, k: int, todo: list) -> np.ndarray:
    kind = self.space.kinds[k]
    batch = self.builder.build([m.candidate.tree for _, m, _ in todo], self.rows)
    labels = np.zeros((self.rows,), np.int32)
    labels[:len(todo)] = [m.candidate.tree.label for _, m, _ in todo]
    gains = self.devices.fetch(_leaf_gains(self.graphdef, self.state, kind,
                                           self.devices.put_trees(batch),
                                           *self.devices.put_rows(labels)))
    row = np.concatenate([np.full(len(p), r) for r, (_, _, p) in enumerate(todo)])
    nodes = np.concatenate([m.leaf_nodes[self.matches[j][k].starts[p]] for j, m, p in todo])
    parent = np.array([m.candidate.score for _, m, _ in todo])[row]
    if kind != SUB:
      return parent + gains[row, nodes]
    # A leaf's Sub picks list its synonyms in the order its batch slots do (space.substitutes).
    slots = np.concatenate([_slots(self.matches[j][k].starts)[p] for j, _, p in todo])
    return parent + gains[row, nodes, slots]

  def child(self, j: int, k: int, parent: _TreeMember, p: int, score: float) -> _TreeMember:
    found = self.matches[j][k]
    pick = Pick(int(found.starts[p]), k, found.replacements[p])
    picks = tuple(sorted(parent.candidate.picks + (pick,), key=lambda q: q.start))
    return _tree_member(self.space, self.trees[j], picks, score)


def _slots(starts: np.ndarray) -> np.ndarray:
  """Rank of each pick among the picks of its leaf (``starts`` sorted)."""
  return np.arange(len(starts)) - np.searchsorted(starts, starts)


def _check(space: TreeSpace, builder: TreeBatchBuilder, beam: int, batch_size: int) -> None:
  check_search_settings(beam, batch_size)
  if builder.space is not space:
    raise ValueError("The builder lowers trees for another space (or none): the Sub gains are "
                     "read from its substitute slots. Pass TreeBatchBuilder(vocab, space, ...) "
                     "built with this space.")


def tree_hotflip_search(graphdef: nnx.GraphDef, state, space: TreeSpace, trees: Sequence[Tree],
                        builder: TreeBatchBuilder, *, beam: int = 5, batch_size: int = 32,
                        progress: bool = False, mesh: Mesh | None = None
                        ) -> list[tuple[TreeHotFlipCandidate, ...]]:
  """HotFlip beam search on n trees (see the module docstring).

  Args:
    graphdef, state: ``nnx.split(model)`` of a
      :class:`~arc_jax.nn.tree_models.TreeLSTMClassifier`; ``state`` may also be a tuple of
      states, e.g. ``(params, rest)``.
    space: the tree space, restricted to the vocabulary.
    trees: n trees; their root labels are the labels of the loss whose increase is estimated.
    builder: lowers the candidates; built for ``space`` (its Sub slots) with node buckets that
      hold every candidate (the largest tree plus 2 nodes per Dup budget). One bucket compiles
      the gradient once per rewrite kind and number of schedule steps; finer buckets pad the
      chunks of small trees less (every padded node costs a leaf computation) for more
      compilations.
    beam: beam width (5 for HF Acc, 1 for adversarial training).
    batch_size: trees searched together; each gradient call has ``batch_size · beam`` rows.
    progress: tqdm bar over trees.
    mesh: split each call's rows over these devices; None: the default device.

  Returns:
    Per tree, up to ``beam`` candidates with distinct trees, best score first; t itself is among
    them while no child outscores it.
  """
  _check(space, builder, beam, batch_size)
  graphdef, state = merged(graphdef, state)
  devices = Devices(mesh)
  state = devices.state(state)
  rows = devices.rows(batch_size * beam)
  return search_in_chunks(
      [t.num_nodes for t in trees], batch_size, progress,
      lambda chunk: _TreeSearch(graphdef, state, space, [trees[i] for i in chunk], builder,
                                beam, rows, devices))


def tree_adversarial_examples(graphdef: nnx.GraphDef, state, space: TreeSpace,
                              trees: Sequence[Tree], builder: TreeBatchBuilder, *,
                              batch_size: int = 32, mesh: Mesh | None = None) -> list[Tree]:
  """HotFlip adversarial training's extra rows: the top-1 (beam 1) tree of each tree, node
  labels carried over (t itself when no rewrite scores above 0)."""
  found = tree_hotflip_search(graphdef, state, space, trees, builder, beam=1,
                              batch_size=batch_size, mesh=mesh)
  return [candidates[0].tree for candidates in found]


def tree_hotflip_robustness(graphdef: nnx.GraphDef, state, space: TreeSpace,
                            trees: Sequence[Tree], builder: TreeBatchBuilder,
                            predict_root_logits: PredictTreeFn, *, beam: int = 5,
                            batch_size: int = 32, progress: bool = False,
                            mesh: Mesh | None = None) -> HotFlipResult:
  """HF Acc of a Tree-LSTM: robust iff t and its ``beam`` HotFlip trees are classified as t's
  root label at their roots (trees whose clean prediction is wrong are not attacked).

  Args:
    graphdef, state, space, trees, builder, beam, batch_size, progress, mesh: as for
      :func:`tree_hotflip_search`.
    predict_root_logits: ``(batch) -> root logits (B, K)`` of the same model, called with
      ``batch_size · beam`` trees lowered by ``builder`` (as in
      :func:`~arc_jax.attacks.exhaustive_tree_robustness`).

  Returns:
    A :class:`~arc_jax.attacks.HotFlipResult` whose candidates and counterexamples are nested
    pairs.
  """
  _check(space, builder, beam, batch_size)
  labels = np.array([t.label for t in trees], np.int64)
  rows = Devices(mesh).rows(batch_size * beam)

  def classify(members: list[Tree]) -> np.ndarray:
    out = np.zeros(len(members), np.int64)
    order = np.argsort([t.num_nodes for t in members], kind="stable")
    for start in range(0, len(order), rows):
      idx = order[start:start + rows]
      logits = predict_root_logits(builder.build([members[i] for i in idx], rows))
      out[idx] = np.argmax(np.asarray(logits)[:len(idx)], axis=-1)
    return out

  def attack(attacked: np.ndarray) -> list[tuple[Tree, ...]]:
    found = tree_hotflip_search(graphdef, state, space, [trees[i] for i in attacked], builder,
                                beam=beam, batch_size=batch_size, progress=progress, mesh=mesh)
    return [tuple(c.tree for c in candidates) for candidates in found]

  result = robustness(trees, labels, classify, attack)
  nested = lambda t: None if t is None else to_nested(t)
  return dataclasses.replace(
      result, candidates=tuple(tuple(map(to_nested, c)) for c in result.candidates),
      counterexamples=tuple(map(nested, result.counterexamples)))
