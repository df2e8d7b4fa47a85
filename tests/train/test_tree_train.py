"""End to end on the real SST trees: one epoch of Tree-LSTM ARC training (λ > 0 from the first
step) on 60 training trees, then Acc, CF, EX and HF of 20 test trees with experiments/evaluate.py,
the shortcut-free audit of the certificates, and a HotFlip-trained run from experiments/train.py.

Skipped when the real data cannot be found (see arc_jax.data.paths).
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.helpers.experiment_scripts import load_script

from arc_jax.data import paths
from arc_jax.train import METHODS, build_experiment, train_and_evaluate

try:
  paths.find_data_file("sst/train.txt.gz")
except paths.DataFileNotFoundError as missing:
  pytest.skip(f"real data not found: {missing}", allow_module_level=True)

@pytest.fixture(scope="module")
def tree_run(tmp_path_factory):
  """A run of experiments/configs/tree.py:arc,del2sub2 cut to 3 steps of 20 trees (hidden 16,
  λ = 0.5 and ε = 1 from the first step); its directory and summary."""
  config = load_script("configs/tree").get_config("arc,del2sub2")
  config.num_train, config.num_dev, config.num_test = 60, 20, 20
  config.eval_batch_size = 20
  config.hidden = 16
  config.num_epochs = 1
  config.lambda_start, config.eps_start = 0.5, 1.0
  config.progress, config.log_every = False, 1
  run = tmp_path_factory.mktemp("tree") / "run"
  return run, train_and_evaluate(config, run)


def evaluate(run, *flags, status=0):
  assert load_script("evaluate").main(["--workdir", str(run), "--no-progress", *flags]) == status


def test_tree_arc_trains_one_epoch_then_evaluates_acc_cf_ex_hf(tree_run, capsys):
  run, summary = tree_run
  assert summary["status"] == "completed" and summary["steps"] == 3
  assert summary["selection"] == "dev_cf_acc" and summary["test"]["examples"] == 20
  logs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
  assert [r["kind"] for r in logs] == ["train"] * 3 + ["epoch"]
  assert all(r["lambda"] == 0.5 and r["eps"] == 1.0 and "train_cf_acc" in r for r in logs)

  evaluate(run)  # every metric, HF with beam 5
  results = json.loads((run / "eval" / "test_Del2Sub2.json").read_text())
  metrics = results["metrics"]
  assert sorted(metrics) == ["acc", "cf", "ex", "hf"] and {m["total"] for m in metrics.values()} == {20}
  counts = [metrics[name]["count"] for name in ("cf", "ex", "hf", "acc")]
  assert counts == sorted(counts)  # and per tree: evaluate checks CF ⇒ EX ⇒ HF ⇒ Acc
  assert metrics["hf"]["beam"] == 5
  assert metrics["hf"]["counterexamples_found"] == counts[3] - counts[2]
  size = results["space_size"]
  assert size["max"] >= size["mean"] >= 1 and size["max"] >= size["median"] >= 1
  assert metrics["acc"]["count"] == summary["test"]["correct"]
  assert metrics["cf"]["count"] == summary["test"]["certified"]
  # Every correct, uncertified tree had S(t) enumerated beyond t.
  assert metrics["ex"]["enumerated"] == metrics["acc"]["count"] - metrics["cf"]["count"]
  assert results["checkpoint"] == {"which": "best", "step": 3, "epoch": 0}

  # Settings that do not fit the run exit with status 2 and a message that names the fix.
  capsys.readouterr()
  evaluate(run, "--first", "0", status=2)
  assert "error: first=0: evaluate at least one example" in capsys.readouterr().err
  evaluate(run, "--synonyms", "counterfitted", status=2)  # trained vectors: the run's lexicon
  assert "trained its word vectors" in capsys.readouterr().err


def test_tree_exhaustive_audit_enumerates_certified_trees_and_agrees(tree_run):
  run, summary = tree_run
  evaluate(run, "--metrics", "ex")
  evaluate(run, "--metrics", "acc,ex", "--no-shortcut")
  shortcut = json.loads((run / "eval" / "test_Del2Sub2_cf_ex.json").read_text())["metrics"]
  audit = json.loads((run / "eval" / "test_Del2Sub2_acc_cf_ex_audit.json").read_text())["metrics"]
  assert audit["cf"]["count"] == summary["test"]["certified"] > 0
  assert audit["ex"]["audit_failures"] == []
  assert audit["ex"]["enumerated"] == audit["acc"]["count"]  # the certified trees too
  assert audit["ex"]["count"] == shortcut["ex"]["count"]
  assert audit["ex"]["members_evaluated"] > shortcut["ex"]["members_evaluated"]


def test_first_n_evaluates_a_prefix_and_names_it(tree_run):
  run, _ = tree_run
  evaluate(run, "--metrics", "acc", "--first", "7")
  evaluate(run, "--metrics", "acc")
  first = json.loads((run / "eval" / "test_first7_Del2Sub2_acc.json").read_text())
  whole = json.loads((run / "eval" / "test_Del2Sub2_acc.json").read_text())
  assert (first["first"], first["examples"], first["metrics"]["acc"]["total"]) == (7, 7, 7)
  assert whole["first"] is None and whole["examples"] == 20
  assert first["space_size"]["max"] <= whole["space_size"]["max"]


def test_hotflip_transform_appends_a_member_of_each_tree_with_node_labels():
  config = load_script("configs/tree").get_config("hotflip,del2sub2")
  config.num_train, config.num_dev, config.num_test = 20, 20, 20
  config.hidden = 16
  experiment = build_experiment(config)
  (batch, *_) = experiment.batches("train", 20, certify=False)
  doubled = METHODS["hotflip"].batch_transform(experiment)(batch, 0, experiment.params)
  trees = [experiment.splits["train"][i] for i in batch.indices]
  assert doubled.trees.shape[0] == 40 and list(doubled.indices) == list(range(40))
  originals = experiment.builder.build(trees)
  np.testing.assert_array_equal(doubled.trees.token_ids[:20], originals.token_ids)
  rewritten = 0
  for b, tree in enumerate(trees):
    n = int(doubled.trees.num_nodes[20 + b])
    labels = doubled.trees.labels[20 + b, :n]
    assert labels[-1] == tree.label and set(labels) <= set(tree.labels)
    rewritten += n != tree.num_nodes or not np.array_equal(
        doubled.trees.token_ids[20 + b, :n], originals.token_ids[b, :n])
  assert rewritten > 0  # the attack rewrites


def test_hotflip_tree_run_from_the_command_line(tmp_path):
  """experiments/train.py with the tree HotFlip row, cut to one step of 20 trees."""
  run = tmp_path / "run"
  experiments = Path(__file__).resolve().parents[2] / "experiments"
  done = subprocess.run(
      [sys.executable, str(experiments / "train.py"),
       f"--config={experiments / 'configs' / 'tree.py'}:hotflip,del2sub2", f"--workdir={run}",
       "--config.num_train=20", "--config.num_dev=20", "--config.num_test=20",
       "--config.hidden=8", "--config.num_epochs=1", "--config.progress=False"],
      capture_output=True, text=True, timeout=900, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  summary = json.loads((run / "summary.json").read_text())
  assert summary["status"] == "completed" and summary["method"] == "hotflip"
  assert summary["steps"] == 1 and summary["selection"] == "dev_acc"
