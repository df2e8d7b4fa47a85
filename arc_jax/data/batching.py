"""Length-bucketed, fixed-size batches of token ids, reproducible from a seed and resumable.

Training order follows the original's pooled sampler (docs/ORIGINAL.md §1): a random permutation,
cut into pools of ``pool · B`` examples, each pool sorted by length and cut into batches, then
the batches shuffled. Sentences of similar length share a batch, so little padding is computed.
Every batch has exactly ``B`` rows (missing rows are padding: length 0, weight 0, index -1) and
its width is a length bucket, so a jitted step compiles once per bucket.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Mapping, Protocol, Sequence

import jax
import numpy as np

from arc_jax.padding import LENGTH_BUCKETS, bucket, word_ids

OOV_FIX = "drop out-of-vocabulary tokens first (arc_jax.data.drop_oov)."
"""What a missing word's error tells to do."""


class RowPlanner(Protocol):
  """What lowers the rows of a batch for certification: :class:`arc_jax.perturbation.PlanBuilder`,
  a layer above the data. Its plan has the batch's ``token_ids`` and ``lengths``."""

  def build(self, sentences: Sequence[Sequence[str]], batch_size: int | None = None) -> Any:
    ...


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Batch:
  """B sentences, padded.

  Attributes:
    token_ids: int32 (B, N), word ids, 0 at padding; N is a length bucket.
    lengths: int32 (B,), tokens per row (0 for padding rows).
    labels: int32 (B,), 0 for padding rows.
    weights: float32 (B,), 1 for real rows, 0 for padding rows.
    indices: int32 (B,), position of each row in the split, -1 for padding rows.
    plan: the certification DP plan of these rows (an :class:`arc_jax.perturbation.Plan`, same
      token_ids), if a plan builder was given.
  """

  token_ids: np.ndarray
  lengths: np.ndarray
  labels: np.ndarray
  weights: np.ndarray
  indices: np.ndarray
  plan: Any = None


def num_batches(num_examples: int, batch_size: int) -> int:
  return -(-num_examples // batch_size)


def batch_order(lengths: Sequence, batch_size: int, *, seed: int = 0, epoch: int = 0,
                shuffle: bool = True, pool: int = 100) -> list[np.ndarray]:
  """Example indices of every batch of one epoch, in order.

  Args:
    lengths: (n,) sentence lengths, or (n, K) integer keys sorted lexicographically (e.g. a
      length bucket and the reachable budgets before the length, so a batch's rows share a
      reachable grid); the random draws do not depend on them.
    batch_size: B.
    seed, epoch: the order is a pure function of (seed, epoch).
    shuffle: pooled random order (training); else all examples sorted by length (evaluation).
    pool: pool size in batches.

  Returns:
    ``num_batches(n, B)`` int arrays of B indices, except one shorter batch when B does not
    divide n (the last one without shuffling, anywhere with it).
  """
  if batch_size < 1:
    raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
  keys = np.asarray(lengths, np.int64)
  keys = keys[:, None] if keys.ndim == 1 else keys
  by_key = lambda indices: indices[np.lexsort(keys[indices].T[::-1])]  # stable
  if not shuffle:
    order = by_key(np.arange(len(keys)))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
  rng = np.random.default_rng([seed, epoch])
  permutation = rng.permutation(len(keys))
  batches = []
  for start in range(0, len(permutation), pool * batch_size):
    chunk = by_key(permutation[start:start + pool * batch_size])
    batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
  return [batches[i] for i in rng.permutation(len(batches))]


def _token_ids(rows: Sequence[Sequence[str]], indices: Sequence[int], vocab: Mapping[str, int],
               batch_size: int, length_buckets: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
  """(int32 (B, N) ids, int32 (B,) lengths) of ``rows``, zero-padded to B rows and a bucket N."""
  if len(rows) > batch_size:
    raise ValueError(f"{len(rows)} sentences do not fit in a batch of {batch_size}.")
  width = bucket(max([len(r) for r in rows] + [1]), length_buckets)
  token_ids = np.zeros((batch_size, width), np.int32)
  lengths = np.zeros((batch_size,), np.int32)
  for b, row in enumerate(rows):
    token_ids[b, :len(row)] = word_ids(vocab, row, OOV_FIX, f" (sentence {indices[b]})")
    lengths[b] = len(row)
  return token_ids, lengths


def make_batch(sentences: Sequence[Sequence[str]], labels: Sequence[int], indices: Sequence[int],
               vocab: Mapping[str, int], batch_size: int, *,
               plan_builder: RowPlanner | None = None,
               length_buckets: Sequence[int] = LENGTH_BUCKETS) -> Batch:
  """Pads the rows ``indices`` of a split into a :class:`Batch` of ``batch_size`` rows.

  Every token must be in ``vocab`` (drop out-of-vocabulary tokens first, see ``drop_oov``).
  """
  rows = [sentences[i] for i in indices]
  if plan_builder is None:
    plan = None
    token_ids, lengths = _token_ids(rows, indices, vocab, batch_size, length_buckets)
  else:
    plan = plan_builder.build(rows, batch_size=batch_size)
    token_ids, lengths = plan.token_ids, plan.lengths
  padding = batch_size - len(rows)
  return Batch(
      token_ids=token_ids,
      lengths=lengths,
      labels=np.array([labels[i] for i in indices] + [0] * padding, np.int32),
      weights=np.array([1.0] * len(rows) + [0.0] * padding, np.float32),
      indices=np.array(list(indices) + [-1] * padding, np.int32),
      plan=plan,
  )


def iterate_batches(sentences: Sequence[Sequence[str]], labels: Sequence[int],
                    vocab: Mapping[str, int], batch_size: int, *, seed: int = 0, epoch: int = 0,
                    start: int = 0, shuffle: bool = True, plan_builder: RowPlanner | None = None,
                    length_buckets: Sequence[int] = LENGTH_BUCKETS) -> Iterator[Batch]:
  """The batches of one epoch, from batch number ``start`` on (to resume mid-epoch).

  Args:
    sentences: tokenised sentences, all tokens in ``vocab``.
    labels: (n,) labels.
    vocab: word → id (0 = padding).
    batch_size: B, the number of rows of every batch.
    seed, epoch, shuffle: see :func:`batch_order`.
    start: index of the first batch to yield.
    plan_builder: if given, each batch carries the DP plan of its rows (its widths are the
      builder's length buckets).
    length_buckets: allowed padded widths N without a plan builder.
  """
  if len(sentences) != len(labels):
    raise ValueError(f"{len(sentences)} sentences but {len(labels)} labels.")
  lengths = [len(s) for s in sentences]
  order = batch_order(lengths, batch_size, seed=seed, epoch=epoch, shuffle=shuffle)
  if not 0 <= start <= len(order):
    raise ValueError(f"start={start} is outside the {len(order)} batches of this epoch.")
  for indices in order[start:]:
    yield make_batch(sentences, labels, indices, vocab, batch_size, plan_builder=plan_builder,
                     length_buckets=length_buckets)
