"""Functions of word ids evaluated once per distinct id of a batch.

Without dropout on the inputs, what a model computes from a word alone (its projection, an
LSTM's input gates, a Tree-LSTM leaf's state) is the same wherever the word stands, and a batch
repeats few words: the members of one sentence's perturbation space that EX classifies share all
but a few of theirs (26 distinct ids among the 16,384 entries of a 256 × 64 batch of tree
members). Padding is one more repeated id.
"""

from __future__ import annotations

import functools
from typing import Callable

import chex
import jax
import jax.numpy as jnp


def per_distinct_id(fn: Callable[[jax.Array], chex.ArrayTree], ids: jax.Array,
                    capacities: tuple[int, ...] = (64, 256, 1024, 4096)) -> chex.ArrayTree:
  """``fn`` of every entry of ``ids``, evaluated once per distinct id.

  Args:
    fn: ``fn(distinct (K,) int) -> pytree of (1, K, ...) arrays`` whose row k depends on
      ``distinct[k]`` alone (a word's projection, LSTM input gates, Tree-LSTM leaf state).
    ids: int (B, N).
    capacities: K values ``fn`` is compiled for; it runs at the smallest one that holds the
      number of distinct ids (``lax.switch``), or at B·N (every entry, no sharing) beyond them.
      Unused entries of ``distinct`` hold the smallest id, whose rows are never read.

  Returns:
    The pytree of (B, N, ...) arrays whose entry (b, n) is row k of ``fn`` for
    ``distinct[k] = ids[b, n]``: ``fn(ids)`` up to the rounding of how ``fn`` batches its
    rows (a matmul may sum in another order for another K).
  """
  flat = jnp.asarray(ids).reshape(-1)  # a host array indexed by traced positions below
  order = jnp.argsort(flat)
  ordered = flat[order]
  rank = jnp.cumsum(jnp.concatenate([jnp.zeros(1, jnp.int32),
                                     (ordered[1:] != ordered[:-1]).astype(jnp.int32)]))
  inverse = jnp.zeros_like(rank).at[order].set(rank)  # entry → its distinct id's row
  sizes = tuple(k for k in capacities if k < flat.size) + (flat.size,)

  def at(k: int):
    distinct = jnp.full((k,), ordered[0], ids.dtype).at[rank].set(ordered, mode="drop")
    return jax.tree.map(lambda a: a[0, inverse].reshape(ids.shape + a.shape[2:]), fn(distinct))

  branch = jnp.sum(rank[-1] + 1 > jnp.asarray(sizes[:-1], jnp.int32))
  return jax.lax.switch(branch, [functools.partial(at, k) for k in sizes])
