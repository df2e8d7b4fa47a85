"""Pooled, length-bucketed, fixed-size, resumable batches."""

import jax
import numpy as np
import pytest

from arc_jax import parse_space
from arc_jax.data import batching
from arc_jax.perturbation import PlanBuilder, bucket

WORDS = ["good", "film", "the", "bad", "movie", "a"]
VOCAB = {w: i + 1 for i, w in enumerate(WORDS)}


def _sentences(n, seed=0):
  rng = np.random.default_rng(seed)
  return [tuple(rng.choice(WORDS, size=rng.integers(0, 12))) for _ in range(n)]


@pytest.mark.parametrize("shuffle", [True, False])
def test_batch_order_covers_every_example_once(shuffle):
  lengths = np.random.default_rng(1).integers(1, 50, size=1003)
  order = batching.batch_order(lengths, 8, seed=3, shuffle=shuffle, pool=4)
  assert len(order) == batching.num_batches(1003, 8) == 126
  assert sorted(np.concatenate(order).tolist()) == list(range(1003))
  assert sum(len(b) < 8 for b in order) == 1


def test_batch_order_is_a_function_of_seed_and_epoch():
  lengths = np.arange(500) % 37
  order = lambda **kw: np.concatenate(batching.batch_order(lengths, 16, **kw)).tolist()
  assert order(seed=1, epoch=2) == order(seed=1, epoch=2)
  assert order(seed=1, epoch=2) != order(seed=1, epoch=3)
  assert order(seed=1, epoch=2) != order(seed=2, epoch=2)


def test_batches_are_sorted_within_a_pool():
  lengths = np.random.default_rng(0).integers(1, 1000, size=64)
  order = batching.batch_order(lengths, 4, seed=0, pool=16)  # one pool holds everything
  spans = sorted((lengths[b].min(), lengths[b].max()) for b in order)
  assert all(hi <= next_lo for (_, hi), (next_lo, _) in zip(spans, spans[1:]))


def test_evaluation_order_is_by_length():
  order = batching.batch_order([5, 1, 3, 1], 3, shuffle=False)
  assert [b.tolist() for b in order] == [[1, 3, 2], [0]]


def test_keys_sort_each_pool_lexicographically():
  """(n, K) keys (e.g. a reachable grid before the length) sort the pool lexicographically, so a
  batch holds consecutive keys; without shuffling the whole order is lexicographic."""
  rng = np.random.default_rng(0)
  keys = np.stack([rng.integers(0, 3, size=64), rng.integers(1, 9, size=64)], 1)
  order = batching.batch_order(keys, 4, seed=5, pool=16)  # one pool holds everything
  spans = sorted((min(map(tuple, keys[b])), max(map(tuple, keys[b]))) for b in order)
  assert all(hi <= next_lo for (_, hi), (next_lo, _) in zip(spans, spans[1:]))
  flat = np.concatenate(batching.batch_order(keys, 4, shuffle=False))
  assert list(map(tuple, keys[flat])) == sorted(map(tuple, keys))


def test_batches_have_static_shapes_and_padding_rows():
  sentences = _sentences(37)
  labels = [i % 2 for i in range(37)]
  batches = list(batching.iterate_batches(sentences, labels, VOCAB, 8, seed=0))
  assert len(batches) == 5
  for batch in batches:
    assert batch.token_ids.shape[0] == 8
    assert batch.token_ids.shape[1] == bucket(max(int(batch.lengths.max()), 1))
    assert batch.token_ids.dtype == np.int32 and batch.weights.dtype == np.float32
    for row in range(8):
      i = batch.indices[row]
      if i < 0:
        assert batch.lengths[row] == 0 and batch.weights[row] == 0 and batch.labels[row] == 0
        assert not batch.token_ids[row].any()
        continue
      n = len(sentences[i])
      assert batch.lengths[row] == n and batch.weights[row] == 1 and batch.labels[row] == labels[i]
      assert batch.token_ids[row, :n].tolist() == [VOCAB[w] for w in sentences[i]]
      assert not batch.token_ids[row, n:].any()
  assert sum(int(b.weights.sum()) for b in batches) == 37


def test_resuming_from_a_batch_index():
  sentences, labels = _sentences(50), [0] * 50
  full = list(batching.iterate_batches(sentences, labels, VOCAB, 4, seed=5, epoch=1))
  resumed = list(batching.iterate_batches(sentences, labels, VOCAB, 4, seed=5, epoch=1, start=9))
  assert len(resumed) == len(full) - 9
  for a, b in zip(full[9:], resumed):
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.token_ids, b.token_ids)
  with pytest.raises(ValueError, match="outside the 13 batches"):
    next(batching.iterate_batches(sentences, labels, VOCAB, 4, start=14))


def test_batches_carry_the_dp_plan():
  space = parse_space("[(Del,2),(Sub,2)]", synonyms={"good": ["bad"], "film": ["movie"]})
  builder = PlanBuilder(space, VOCAB)
  sentences = _sentences(20, seed=4)
  for batch in batching.iterate_batches(sentences, [1] * 20, VOCAB, 8, plan_builder=builder):
    rows = [sentences[i] for i in batch.indices if i >= 0]
    expected = builder.build(rows, batch_size=8)
    np.testing.assert_array_equal(batch.plan.token_ids, batch.token_ids)
    np.testing.assert_array_equal(batch.plan.lengths, batch.lengths)
    for got, want in zip(batch.plan.transformations, expected.transformations):
      np.testing.assert_array_equal(got.match, want.match)
      np.testing.assert_array_equal(got.replacement_ids, want.replacement_ids)


def test_batch_is_a_pytree():
  batch = batching.make_batch([("good", "film")], [1], [0], VOCAB, 2)
  assert len(jax.tree_util.tree_leaves(batch)) == 5
  doubled = jax.tree_util.tree_map(lambda x: x * 2, batch)
  assert doubled.lengths.tolist() == [4, 0]


def test_errors():
  with pytest.raises(KeyError, match=r"'zz' \(sentence 0\) is not in the vocabulary.*drop_oov"):
    batching.make_batch([("zz",)], [0], [0], VOCAB, 2)
  with pytest.raises(ValueError, match="3 sentences do not fit in a batch of 2"):
    batching.make_batch([("good",)] * 3, [0] * 3, [0, 1, 2], VOCAB, 2)
  with pytest.raises(ValueError, match="2 sentences but 1 labels"):
    list(batching.iterate_batches([("good",)] * 2, [0], VOCAB, 2))
  with pytest.raises(ValueError, match="batch_size must be >= 1"):
    batching.batch_order([1, 2], 0)
