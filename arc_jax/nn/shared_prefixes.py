"""Concrete logits of many strings, each LSTM step computed once per distinct prefix.

The members of one perturbation space share most of their prefixes: the 30,774 members that EX
classifies for the Normal LSTM on the first 200 SST-2 test sentences under [(Del,2),(Sub,2)] take
1,324,715 LSTM steps one by one, and have 357,094 distinct non-empty prefixes. A recurrent state
depends on its prefix alone, so :func:`predict_shared` steps each distinct prefix once: the nodes
of the strings' prefix trie (:func:`build`), in breadth-first order, ``chunk`` nodes per scan
step, each node's carry gathered from its parent's row of a state buffer. A backward direction
runs the same way on the trie of the reversed strings (their suffixes). Final and mean pooling
read a string's last node (the mean carries the sum of h along the path); attention pooling
needs every position's state and has no prefix sharing (use :func:`arc_jax.nn.predict`).

The arithmetic of each step is the classifier's own cell step on the same inputs, so the logits
equal :func:`~arc_jax.nn.predict`'s up to the rounding of how the matmuls batch their rows (a
few ulps); callers that need predict's exact decision re-check near ties with it
(:mod:`arc_jax.verify.verifier` does).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax.nn import recurrent
from arc_jax.nn.models import LSTMClassifier
from arc_jax.padding import pow2_at_least

SHARED_POOLINGS = ("final", "mean")
"""The poolings :func:`predict_shared` computes (a function of the last state and the sum of the
states along the path)."""


@dataclasses.dataclass(frozen=True)
class Trie:
  """The prefix trie of m strings, laid out for :func:`predict_shared`.

  Row 0 of the state buffer is the empty prefix (the zero carry); slot (j, c) of the layout is
  buffer row ``1 + j * chunk + c``. Every node's parent lies in an earlier scan step.

  Attributes:
    tokens: int32 (steps, chunk): the word id the node at each slot appends (0 in padding slots,
      whose rows are never read).
    parents: int32 (steps, chunk): the buffer row of each slot's parent.
    leaves: int32 (m,): the buffer row of each string's last node (0: the empty string).
    nodes: the number of distinct non-empty prefixes.
  """

  tokens: np.ndarray
  parents: np.ndarray
  leaves: np.ndarray
  nodes: int


def padded(strings: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
  """(int64 (m, width) ids, −1 past each end; int64 (m,) lengths) of m id strings."""
  lengths = np.fromiter(map(len, strings), np.int64, len(strings))
  width = max(int(lengths.max(initial=0)), 1)
  out = np.full((len(strings), width), -1, np.int64)
  out[np.arange(width)[None, :] < lengths[:, None]] = np.fromiter(
      itertools.chain.from_iterable(strings), np.int64, int(lengths.sum()))
  return out, lengths


def reversed_rows(ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
  """Each row of :func:`padded` ids reversed within its length (−1 past the end)."""
  columns = lengths[:, None] - 1 - np.arange(ids.shape[1])[None, :]
  return np.where(columns >= 0, np.take_along_axis(ids, np.maximum(columns, 0), axis=1), -1)


def build(strings: Sequence[Sequence[int]], chunk: int = 256) -> Trie:
  """The prefix trie of id ``strings``, nodes in breadth-first order (see :func:`build_padded`)."""
  return build_padded(*padded(strings), chunk)


def build_padded(ids: np.ndarray, lengths: np.ndarray, chunk: int = 256) -> Trie:
  """The prefix trie of the m strings of :func:`padded` ids (m, width) of ``lengths`` (m,).

  Sorted lexicographically, string m adds the nodes at depths lcp(m−1, m)+1 .. len(m); the node
  at depth d of string m belongs to its owner, the last string m' ≤ m with lcp(m'−1, m') < d. In
  breadth-first order (depth, owner) the parents are non-decreasing, so a scan step may take
  nodes up to the first one whose parent is in that step (``np.searchsorted``), at most
  ``chunk``.
  """
  m, width = ids.shape
  order = np.lexsort(ids.T[::-1])
  ids, lengths = ids[order], lengths[order]
  same = np.cumprod(ids[1:] == ids[:-1], axis=1).sum(axis=1)
  lcp = np.concatenate([[0], np.minimum(same, np.minimum(lengths[1:], lengths[:-1]))])
  depth = np.arange(1, width + 1)
  # owner[m, d-1]: the string whose node is string m's prefix of length d.
  owner = np.maximum.accumulate(np.where(lcp[:, None] < depth[None, :],
                                         np.arange(m)[:, None], 0), axis=0)
  new = (lcp[:, None] < depth[None, :]) & (depth[None, :] <= lengths[:, None])
  node_depth, node_owner = (a.astype(np.int64) for a in np.nonzero(new.T))  # depth-major
  node_depth += 1
  position = np.full((width + 1, m), -1, np.int64)  # (depth, owner) → node index
  position[node_depth, node_owner] = np.arange(len(node_depth))
  parent = np.where(node_depth > 1, position[node_depth - 1, owner[node_owner,
                                                                   np.maximum(node_depth - 2, 0)]],
                    -1)
  # Scan steps: each takes nodes from `start` up to `chunk` of them, stopping before the first
  # node whose parent is in the step itself.
  starts, start = [], 0
  while start < len(node_depth):
    starts.append(start)
    start = min(start + chunk, int(np.searchsorted(parent, start, side="left")))
  starts = np.asarray(starts + [len(node_depth)], np.int64)
  step = np.repeat(np.arange(len(starts) - 1), np.diff(starts))
  row = 1 + step * chunk + (np.arange(len(node_depth)) - starts[step])
  steps = len(starts) - 1
  tokens = np.zeros((steps, chunk), np.int32)
  parents = np.zeros((steps, chunk), np.int32)
  tokens.reshape(-1)[row - 1] = ids[node_owner, node_depth - 1]
  parents.reshape(-1)[row - 1] = np.where(parent >= 0, row[parent], 0)
  # An empty string's last node is -1, the root row 0 appended to the rows.
  last = position[lengths, owner[np.arange(m), np.maximum(lengths - 1, 0)]]
  leaves = np.zeros(m, np.int32)
  leaves[order] = np.append(row, 0)[np.where(lengths > 0, last, -1)]
  return Trie(tokens, parents, leaves, len(node_depth))


def _states(cell: recurrent.RecurrentCell, table: jax.Array, words: jax.Array,
            parents: jax.Array, mean: bool) -> tuple[jax.Array, jax.Array | None]:
  """Each buffer row's state h and (if ``mean``) sum of h along its path, (R, H) each.

  Args:
    table: (K, G) the cell's input gates of K distinct words.
    words: int32 (steps, chunk): the row of ``table`` each slot's node appends (gathered inside
      the scan step: a (steps, chunk, G) array of gates would be hundreds of MB).
    parents: int32 (steps, chunk): each slot's parent row.
  """
  steps, chunk = parents.shape
  rows = 1 + steps * chunk
  zeros = jnp.zeros((rows, cell.hidden), table.dtype)
  buffers = recurrent.initial_carry(cell, zeros) + ((zeros,) if mean else ())

  def body(buffers, inputs):
    j, word, parent = inputs
    carry = tuple(b[parent] for b in buffers[:cell.carry_size])
    new = cell.step(carry, table[word])
    if mean:
      new = new + (buffers[-1][parent] + new[0],)
    start = 1 + j * chunk
    return tuple(jax.lax.dynamic_update_slice_in_dim(b, v, start, axis=0)
                 for b, v in zip(buffers, new)), None

  buffers, _ = jax.lax.scan(body, buffers, (jnp.arange(steps), words, parents))
  return buffers[0], (buffers[-1] if mean else None)


@functools.partial(jax.jit, static_argnums=0)
def _shared_logits(graphdef: nnx.GraphDef, state: nnx.State, distinct: jax.Array,
                   words: tuple[jax.Array, ...], parents: tuple[jax.Array, ...],
                   leaves: tuple[jax.Array, ...], lengths: jax.Array) -> jax.Array:
  model = nnx.merge(graphdef, state)
  mean = model.pooling == "mean"
  tables = model.input_gates(model.embed(distinct[None]))  # per direction (1, K, G)
  runs = []
  for cell, table, w, p, leaf in zip(model.cells, tables, words, parents, leaves):
    h, total = _states(cell, table[0], w, p, mean)
    runs.append((h[leaf], None if total is None else total[leaf], None))
  return model.head(model.pool(runs, lengths))


def _bucket(size: int, smallest: int) -> int:
  """The smallest of ``smallest`` times 1, 1.5, 2, 3, 4, 6, ... that holds ``size`` (at most a
  third of a bucket is padding)."""
  bucket = smallest
  while bucket < size:
    bucket = bucket * 3 // 2 if bucket & (bucket - 1) == 0 else bucket * 4 // 3
  return bucket


def predict_shared(graphdef: nnx.GraphDef, state: nnx.State, strings: Sequence[Sequence[int]], *,
                   chunk: int = 256) -> np.ndarray:
  """Evaluation-mode logits (m, K) of id ``strings`` for a final- or mean-pooling
  (Bi-)LSTM classifier ``nnx.merge(graphdef, state)``, one cell step per distinct prefix (and
  per distinct suffix for the backward direction).

  Shapes are bucketed (scan steps by :func:`_bucket`, strings with them, distinct words to
  powers of two) so few programs compile.

  Raises:
    ValueError: a model that is not an LSTMClassifier with final or mean pooling.
  """
  model = nnx.merge(graphdef, state)
  if not isinstance(model, LSTMClassifier) or model.pooling not in SHARED_POOLINGS:
    raise ValueError(f"predict_shared needs an LSTMClassifier with pooling in {SHARED_POOLINGS}; "
                     "use arc_jax.nn.predict for attention pooling.")
  ids, lengths = padded(strings)
  tries = [build_padded(ids, lengths, chunk)]
  if model.bidirectional:
    tries.append(build_padded(reversed_rows(ids, lengths), lengths, chunk))
  steps = _bucket(max(t.tokens.shape[0] for t in tries), 4)
  # Strings: a quarter of the slots (members have 7 nodes each on average under
  # [(Del,2),(Sub,2)]), so the string count adds no shapes of its own, or more where needed.
  m = max(steps * chunk // 4, pow2_at_least(len(strings)))
  pad = lambda a, n: np.pad(a, [(0, n - a.shape[0])] + [(0, 0)] * (a.ndim - 1))
  distinct, rows = np.unique(np.stack([pad(t.tokens, steps) for t in tries]),
                             return_inverse=True)
  rows = rows.reshape(len(tries), steps, -1).astype(np.int32)
  logits = _shared_logits(graphdef, state, pad(distinct.astype(np.int32),
                                               pow2_at_least(max(distinct.size, 256))),
                          tuple(rows), tuple(pad(t.parents, steps) for t in tries),
                          tuple(pad(t.leaves, m) for t in tries),
                          pad(lengths.astype(np.int32), m))
  chex.assert_shape(logits, (m, model.num_classes))
  return np.asarray(logits)[:len(strings)]  # cut on the host: a device slice compiles per length
