"""ARC-A3T and A3T training on the fake data root: the member batches, the configs, and short runs
(ARC-A3T from the command line)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.fake_data_root import cache_dir, data_root  # noqa: F401

from tests.helpers.experiment_scripts import load_script
from arc_jax.data import iterate_batches
from arc_jax.perturbation.split import split_space
from arc_jax.train.config import merge, migrate
from arc_jax.train import (METHODS, ConfigError, build_experiment, default_config,
                           train_and_evaluate, validate)

ROOT = Path(__file__).parents[2]


@pytest.fixture
def fake_data(data_root, cache_dir, monkeypatch):
  monkeypatch.setenv("ARC_DATA_DIR", str(data_root))
  monkeypatch.setenv("ARC_CACHE_DIR", str(cache_dir))


def tiny_config(method="arc_a3t", abstracted="Sub", search="enumerate"):
  c = default_config()
  c.name, c.method = f"{method}_test", method
  c.space, c.augmented.abstracted, c.augmented.augment_search = "[(Del,1),(Sub,1)]", abstracted, search
  c.hidden, c.lstm.projection, c.lstm.head_hidden = 6, 5, 4
  c.batch_size = c.eval_batch_size = 4
  c.num_epochs, c.ramp_epochs, c.lambda_start = 2, 2, 0.5
  c.progress = False
  return c


@pytest.mark.parametrize("abstracted,search", [("Sub", "enumerate"), ("Del", "enumerate"),
                                               ("Sub", "hotflip")])
def test_member_batches_hold_x_and_members_with_free_windows(fake_data, abstracted, search):
  config = tiny_config(abstracted=abstracted, search=search)
  experiment = build_experiment(config)
  train, vocab = experiment.splits["train"], experiment.data.vocab
  words = {i: w for w, i in vocab.items()}
  split = split_space(experiment.space, abstracted)
  (batch, *_) = iterate_batches(train.tokens, train.labels, vocab, 4, shuffle=False)
  out = METHODS["arc_a3t"].batch_transform(experiment)(batch, 0, experiment.params)

  slots, n = config.augmented.augment_members + 1, int(batch.weights.sum())
  assert out.labels.shape == (4 * slots,) and out.plan.token_ids.shape[0] == 4 * slots
  np.testing.assert_array_equal(out.weights, [1.0] * n * slots + [0.0] * (4 - n) * slots)
  for e, i in enumerate(batch.indices[:n]):
    x = tuple(train.tokens[i])
    members = split.members(x)
    for m in range(slots):
      row = e * slots + m
      tokens = tuple(words[t] for t in out.token_ids[row, :out.lengths[row]])
      assert out.labels[row] == train.labels[i] and out.indices[row] == i
      assert tokens == x if m == 0 else tokens in {mm.tokens for mm in members}
      # The abstracted part (1-token windows here) matches only where the augmented rewrites
      # left a token untouched.
      free = set().union(*(np.flatnonzero(mm.free_windows(1)) for mm in members
                           if mm.tokens == tokens))
      for k in range(len(split.abstract.names)):
        assert set(np.flatnonzero(out.plan.transformations[k].match[row])) <= free


def test_a_short_a3t_run_completes(fake_data, tmp_path):
  config = tiny_config("a3t", search="hotflip")
  config.augmented.augment_members = 1
  summary = train_and_evaluate(config, tmp_path / "run")
  assert summary["status"] == "completed" and summary["method"] == "a3t"
  assert summary["selection"] == "dev_cf_acc" and summary["steps"] == 2 * summary["steps_per_epoch"]
  lines = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
  assert all(np.isfinite(l["loss"]) for l in lines)


@pytest.mark.parametrize("part,abstracted", [("first", "Del"), ("second", "Sub")])
def test_a_short_arc_a3t_run_completes_from_the_command_line(fake_data, data_root, cache_dir,
                                                              tmp_path, part, abstracted):
  """Trains the Abs-fir and Abs-sec rows from their configs; from Abs-fir's run, makes the δ
  figures' points."""
  run = tmp_path / "run"
  flags = ["--config.hidden=6", "--config.lstm.projection=5", "--config.lstm.head_hidden=4",
           "--config.batch_size=4", "--config.eval_batch_size=4", "--config.num_epochs=2",
           "--config.ramp_epochs=2", "--config.lambda_start=0.5", "--config.progress=False"]
  done = subprocess.run([sys.executable, str(ROOT / "experiments" / "train.py"),
                         f"--config={ROOT / 'experiments' / 'configs' / 'arc_a3t.py'}:del2sub2,{part}",
                         *flags, f"--workdir={run}"], capture_output=True, text=True, timeout=900,
                        check=False, env=dict(os.environ, ARC_DATA_DIR=str(data_root),
                                              ARC_CACHE_DIR=str(cache_dir)))
  assert done.returncode == 0, done.stderr[-3000:]
  summary = json.loads((run / "summary.json").read_text())
  config = json.loads((run / "config.json").read_text())
  assert summary["status"] == "completed" and summary["method"] == "arc_a3t"
  assert config["augmented"]["abstracted"] == abstracted and config["space"] == "[(Del,2),(Sub,2)]"
  epochs = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
  assert any(e.get("train_cf_acc") is not None for e in epochs)  # the certified objective ran
  if part == "second":
    return

  figures = tmp_path / "figures"
  assert load_script("arc_a3t_delta").main([str(run), "--output-dir", str(figures)]) == 2
  assert load_script("arc_a3t_delta").main([str(run), "--evaluate", "--output-dir",
                                            str(figures)]) == 0
  points = json.loads((figures / "delta.json").read_text())
  assert [(p["instantiation"], p["family"], p["delta"]) for p in points] == [
      ("Abs-fir", "Del+Sub", d) for d in (1, 2, 3)]
  assert all(p["cf"] <= p["ex"] <= p["acc"] for p in points)
  assert (figures / "delta_ex.png").stat().st_size and (figures / "delta_cf.png").stat().st_size
  assert (run / "eval" / "test_Del3Sub3_acc_cf_ex.json").exists()  # evaluate.py's name


def test_configs_and_checks():
  rows = {("del2sub2", "first"): "Del", ("del2sub2", "second"): "Sub",
          ("sub2ins2", "first"): "Ins", ("sub2ins2", "second"): "Sub"}
  for (space, part), abstracted in rows.items():
    c = load_script("configs/arc_a3t").get_config(f"{space},{part}")
    validate(c)
    assert c.augmented.abstracted == abstracted and c.method == "arc_a3t"
  for space in ("del2sub2", "sub2ins2"):
    validate(load_script("configs/a3t").get_config(space))
  with pytest.raises(ConfigError, match="No arc_a3t row"):
    load_script("configs/arc_a3t").get_config("del2ins2,first")
  bad = [(dict(method="a3t", abstracted="Del"), "1→1"),
         (dict(method="arc_a3t", abstracted=""), "abstracted is empty"),
         (dict(method="arc_a3t", abstracted="Ins"), "Cannot abstract"),
         (dict(method="arc_a3t", abstracted="Sub", robust_loss="max_of_means"), "worst_case"),
         (dict(method="arc_a3t", abstracted="Sub", augment_search="random"), "augment_search")]
  for changes, message in bad:  # written flat: migrate moves them into their block
    c = merge(default_config(), migrate(changes))
    with pytest.raises(ConfigError, match=message):
      validate(c)
  c = merge(default_config(), migrate(dict(method="arc_a3t", abstracted="Del",
                                           space="[(Sub,2),(Ins,2)]")))
  validate(c, training=False)  # a trained run may be evaluated under any space
