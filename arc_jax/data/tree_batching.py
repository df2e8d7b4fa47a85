"""Padded batches of trees and their schedule: the structure a Tree-LSTM runs on.

:class:`PaddedTrees` holds B trees padded to N nodes (post-order, children before parents, root at
``num_nodes - 1``) and a *schedule*: the internal nodes of all trees grouped into S steps of at
most W nodes such that both children of a node are computed in an earlier step (or are leaves). A
Tree-LSTM then runs as one ``lax.scan`` over S steps that computes W nodes at once. The schedule is
Hu's list schedule (deepest ready nodes first), which is optimal for in-forests with unit times: S
is the smallest number of steps of width W. What a perturbation space adds to a batch (the
certification DP's candidates) is :class:`arc_jax.perturbation.trees.TreeBatch`, as a
:class:`~arc_jax.perturbation.Plan` adds to a :class:`~arc_jax.data.Batch` of sentences.
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import Mapping, Sequence

import jax
import numpy as np

from arc_jax.data.trees import Tree
from arc_jax.padding import NODE_BUCKETS, STEP_BUCKETS, bucket, word_ids

OOV_FIX = ("tree leaves keep out-of-vocabulary words as vocabulary entries with zero vectors "
           "(prepare_tree_data).")
"""What a missing leaf word's error tells to do."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PaddedTrees:
  """B trees padded to N nodes, with their schedule.

  Nodes are in post-order within each tree; ``flat id = b * N + n`` names node n of tree b, and
  ``B * N`` is a no-op placeholder.

  Attributes:
    token_ids: int32 (B, N), word id of each leaf; 0 at internal nodes and padding.
    left: int32 (B, N), left child of each internal node, -1 at leaves and padding.
    right: int32 (B, N), right child, -1 at leaves and padding.
    labels: int32 (B, N), label of each node, -1 where there is none (padding, perturbed trees).
    num_nodes: int32 (B,), 0 for a padding row; the root of row b is ``num_nodes[b] - 1``.
    schedule: int32 (S, W), flat ids of the internal nodes computed at each step (both children
      of a node are leaves or computed at an earlier step); ``B * N`` pads a step.
  """

  token_ids: np.ndarray
  left: np.ndarray
  right: np.ndarray
  labels: np.ndarray
  num_nodes: np.ndarray
  schedule: np.ndarray

  @property
  def shape(self) -> tuple[int, int]:
    return tuple(self.token_ids.shape)


def hu_schedule(left: np.ndarray, right: np.ndarray, width: int) -> list[list[int]]:
  """Groups the internal nodes of padded trees into steps of at most ``width`` nodes.

  Hu's algorithm: at each step take the ``width`` deepest nodes whose children are done. For
  in-forests with unit times it uses the fewest steps possible (Hu, 1961).

  Args:
    left, right: int (B, N) child indices in post-order, -1 at leaves and padding.
    width: W.

  Returns:
    list of steps, each a list of flat ids ``b * N + n``.
  """
  rows, n_pad = left.shape
  depth = np.zeros((rows, n_pad), np.int64)
  parent = np.full(rows * n_pad, -1, np.int64)
  pending = np.zeros(rows * n_pad, np.int64)
  internal = left >= 0
  base = np.arange(rows)[:, None] * n_pad
  for n in range(n_pad - 1, -1, -1):  # parents come after their children
    b = np.nonzero(internal[:, n])[0]
    for child in (left[b, n], right[b, n]):
      depth[b, child] = depth[b, n] + 1
      parent[b * n_pad + child] = b * n_pad + n
      pending[b * n_pad + n] += internal[b, child]
  depth, parent, pending = depth.reshape(-1).tolist(), parent.tolist(), pending.tolist()
  ready = [(-depth[i], i) for i in (base + np.arange(n_pad))[internal].tolist() if not pending[i]]
  heapq.heapify(ready)
  steps = []
  while ready:
    step = [heapq.heappop(ready)[1] for _ in range(min(width, len(ready)))]
    for i in step:
      p = parent[i]
      if p >= 0:
        pending[p] -= 1
        if pending[p] == 0:
          heapq.heappush(ready, (-depth[p], p))
    steps.append(step)
  return steps


def pad_trees(trees: Sequence[Tree], vocab: Mapping[str, int], batch_size: int | None = None, *,
              max_nodes: int | None = None, width: int = 32, num_steps: int | None = None,
              node_buckets: Sequence[int] = NODE_BUCKETS,
              step_buckets: Sequence[int] = STEP_BUCKETS) -> PaddedTrees:
  """Pads ``trees`` into one batch and schedules its internal nodes.

  Args:
    trees: the trees (post-order).
    vocab: word → id (0 is padding); every leaf word must be in it.
    batch_size: B (default: ``len(trees)``).
    max_nodes: N (default: the node bucket of the largest tree).
    width: W, nodes per step.
    num_steps: S (default: the step bucket of the number of steps needed).
    node_buckets, step_buckets: the allowed N and S.

  Raises:
    ValueError: the trees do not fit in the requested B, N or S.
    KeyError: a leaf word outside ``vocab``.
  """
  rows = len(trees) if batch_size is None else batch_size
  biggest = max((t.num_nodes for t in trees), default=1)
  n_pad = bucket(biggest, node_buckets) if max_nodes is None else max_nodes
  if rows < len(trees) or n_pad < biggest:
    raise ValueError(f"{len(trees)} trees of up to {biggest} nodes do not fit in a batch of "
                     f"{rows} × {n_pad} nodes.")
  token_ids = np.zeros((rows, n_pad), np.int32)
  left = np.full((rows, n_pad), -1, np.int32)
  right = np.full((rows, n_pad), -1, np.int32)
  labels = np.full((rows, n_pad), -1, np.int32)
  num_nodes = np.zeros((rows,), np.int32)
  for b, tree in enumerate(trees):
    n = tree.num_nodes
    num_nodes[b] = n
    left[b, :n], right[b, :n], labels[b, :n] = tree.left, tree.right, tree.labels
    token_ids[b, :n][left[b, :n] < 0] = word_ids(vocab, tree.tokens, OOV_FIX)  # the leaves

  steps = hu_schedule(left, right, width)
  s_pad = bucket(max(len(steps), 1), step_buckets) if num_steps is None else num_steps
  if s_pad < len(steps):
    raise ValueError(f"The trees need {len(steps)} steps of width {width}; num_steps={s_pad}.")
  schedule = np.full((s_pad, width), rows * n_pad, np.int32)
  for i, step in enumerate(steps):
    schedule[i, :len(step)] = step
  return PaddedTrees(token_ids, left, right, labels, num_nodes, schedule)
