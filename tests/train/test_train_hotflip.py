"""HotFlip adversarial training on the fake data root: the batch transform doubles each batch
with members of S(x) found by the attack, and a short run completes."""

import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.fake_data_root import cache_dir, data_root  # noqa: F401

from arc_jax.data import iterate_batches
from arc_jax.train import METHODS, build_experiment, default_config, train_and_evaluate


@pytest.fixture
def fake_data(data_root, cache_dir, monkeypatch):
  monkeypatch.setenv("ARC_DATA_DIR", str(data_root))
  monkeypatch.setenv("ARC_CACHE_DIR", str(cache_dir))


def tiny_config():
  c = default_config()
  c.name = "hotflip_test"
  c.method = "hotflip"
  c.space = "[(Del,1),(Sub,1)]"
  c.hidden, c.lstm.projection, c.lstm.head_hidden = 6, 5, 4
  c.batch_size = c.eval_batch_size = 4
  c.lambda_max = 0.0
  c.progress = False
  return c


def test_transform_appends_a_hotflip_member_of_each_sentence(fake_data):
  experiment = build_experiment(tiny_config())
  train, vocab = experiment.splits["train"], experiment.data.vocab
  words = {i: w for w, i in vocab.items()}
  (batch, *_) = iterate_batches(train.tokens, train.labels, vocab, 4, shuffle=False)
  transform = METHODS["hotflip"].batch_transform(experiment)

  doubled = transform(batch, 0, experiment.params)

  n = int(batch.weights.sum())
  assert n >= 3 and doubled.labels.shape == (8,)
  np.testing.assert_array_equal(doubled.weights, [1.0] * 2 * n + [0.0] * (8 - 2 * n))
  originals = [train.tokens[i] for i in batch.indices[:n]]
  rows = [tuple(words[i] for i in ids[:length])
          for ids, length in zip(doubled.token_ids[:2 * n], doubled.lengths[:2 * n])]
  assert rows[:n] == originals
  for x, partner in zip(originals, rows[n:]):
    assert partner in set(experiment.space.enumerate(x))
  assert any(partner != x for x, partner in zip(originals, rows[n:]))  # the attack rewrites
  np.testing.assert_array_equal(doubled.labels[:2 * n], np.tile(train.labels[batch.indices[:n]], 2))
  again = transform(batch, 7, experiment.params)  # a function of the parameters only
  np.testing.assert_array_equal(again.token_ids, doubled.token_ids)


def test_a_short_hotflip_run_completes(fake_data, tmp_path):
  config = tiny_config()
  config.num_epochs = 2
  summary = train_and_evaluate(config, tmp_path / "run")
  assert summary["status"] == "completed" and summary["method"] == "hotflip"
  assert summary["steps"] == 2 * summary["steps_per_epoch"] and summary["selection"] == "dev_acc"
