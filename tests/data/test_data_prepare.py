"""The one-call experiment data on tiny data."""

import json

import numpy as np
import pytest

from arc_jax.data import iterate_batches, prepare_lstm_data, prepare_tree_data
from arc_jax.perturbation import PlanBuilder, data_space
from tests.helpers.fake_data_root import SST2_TRAIN, cache_dir, data_root


def test_lstm_data(data_root, cache_dir):
  data = prepare_lstm_data(data_root=data_root, cache_dir=cache_dir)
  assert {s: len(d.tokens) for s, d in data.splits.items()} == {
      "train": 5, "validation": 2, "test": 2}
  train = data.splits["train"]
  assert train.labels.tolist() == [label for _, label in SST2_TRAIN]
  # OOV tokens are gone; "zyzzyva" had no vector, so sentence 3 is empty but kept.
  assert train.tokens[1] == ("bleak", "and")
  assert train.tokens[3] == ()
  assert all(w in data.vocab for s in data.splits.values() for t in s.tokens for w in t)
  stats = data.stats["splits"]["train"]
  assert stats["empty"] == [3] and stats["examples"] == 5
  # charming, often, affecting, unflinchingly, desperate and zyzzyva have no vectors.
  assert stats["dropped_tokens"] == 6
  json.dumps(data.stats)
  # Synonyms of dataset words are in the vocabulary when they have vectors.
  assert {"great", "fine", "terrible"} <= set(data.vocab) and "nonword" not in data.vocab
  assert data.synonyms["good"] == ("great", "fine")
  assert data.embeddings.shape == (len(data.vocab) + 1, 4)
  np.testing.assert_array_equal(data.embeddings[0], 0)
  assert data.stopwords == ("a", "and", "the", "of", "to")


def test_drop_empty_records_source_indices(data_root, cache_dir):
  data = prepare_lstm_data(drop_empty=True, data_root=data_root, cache_dir=cache_dir)
  train = data.splits["train"]
  assert len(train.tokens) == 4 and train.source_indices.tolist() == [0, 1, 2, 4]
  assert data.stats["splits"]["train"]["empty"] == [3]


def test_space_and_plans(data_root, cache_dir):
  data = prepare_lstm_data(data_root=data_root, cache_dir=cache_dir)
  space = data_space(data, "[(Del,2),(Sub,2)]")
  perturbed = set(space.enumerate(data.splits["train"].tokens[4]))  # a bad , bad film
  assert ("a", "bad", ",", "terrible", "movie") in perturbed
  builder = PlanBuilder(space, data.vocab)
  split = data.splits["train"]
  batches = list(iterate_batches(split.tokens, split.labels, data.vocab, 4, plan_builder=builder))
  assert len(batches) == 2 and all(b.plan.token_ids.shape == (4, 8) for b in batches)


def test_imdb_and_ppdb(data_root, cache_dir):
  data = prepare_lstm_data("imdb", synonyms="ppdb", max_candidates=1, data_root=data_root,
                           cache_dir=cache_dir)
  assert len(data.splits["train"].tokens) == 2
  assert data.stats["synonyms"] == {"kind": "ppdb", "max_candidates": 1,
                                    "words": len(data.synonyms),
                                    "candidates": len(data.synonyms)}
  with pytest.raises(ValueError, match="Unknown dataset 'sst5'.*prepare_tree_data"):
    prepare_lstm_data("sst5", data_root=data_root, cache_dir=cache_dir)


def test_tree_data_keeps_every_leaf(data_root, cache_dir):
  data = prepare_tree_data(data_root=data_root, cache_dir=cache_dir)
  leaves = {w for trees in data.splits.values() for t in trees for w in t.tokens}
  assert leaves <= set(data.vocab)
  for word in ("zyzzyva", "8\u00a01/2"):
    np.testing.assert_array_equal(data.embeddings[data.vocab[word]], 0)
  assert data.stats["splits"]["test"]["dropped_tokens"] == 1  # zyzzyva: a zero vector
  assert data.stats["splits"]["test"]["empty"] == []
  assert all(c in data.vocab for cs in data.synonyms.values() for c in cs)
  assert "zyzzyva" not in data.synonyms  # no vector, so it is not substituted
