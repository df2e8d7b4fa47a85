"""A GRU classifier (``config.lstm.cell="gru"``) trains with ARC, is kept, and certifies as the DP says."""

import json
import sys
from pathlib import Path

import numpy as np

from tests.helpers.fake_data_root import use_random_sst2

from arc_jax import load_run
from arc_jax.certify import certify
from arc_jax.nn import GRUCell
from arc_jax.train import default_config, train_and_evaluate


def test_arc_trains_a_gru_and_load_run_restores_it(tmp_path, monkeypatch):
  rows = use_random_sst2(tmp_path, monkeypatch)

  c = default_config()
  c.lstm.cell, c.lstm.bidirectional = "gru", True
  c.space = "[(Del,1),(Sub,1)]"
  c.hidden, c.lstm.projection = 4, 3
  c.batch_size = c.eval_batch_size = 8
  c.num_epochs, c.log_every = 1, 1
  c.lambda_start = c.lambda_max = 0.5  # the certified objective from the first step
  c.progress = False
  summary = train_and_evaluate(c, tmp_path / "run")

  assert summary["status"] == "completed" and summary["steps"] == 2
  assert json.loads((tmp_path / "run" / "config.json").read_text())["lstm"]["cell"] == "gru"
  model, vocab, space = load_run(tmp_path / "run")
  assert all(isinstance(cell, GRUCell) for cell in model.cells) and len(model.cells) == 2
  tests = [s.split() for s, _ in rows[:8]]
  result = certify(model, space, tests, [l for _, l in rows[:8]], vocab)
  assert int(np.sum(result["certified"])) == summary["test"]["certified"]
