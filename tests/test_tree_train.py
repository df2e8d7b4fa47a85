"""End to end on the real SST trees: one epoch of Tree-LSTM ARC training (λ > 0 from the first
step) on 60 training trees, then Acc, CF and EX of 20 test trees with experiments/evaluate.py,
and the shortcut-free audit of the certificates.

Skipped when the real data cannot be found (see arc_jax.data.paths).
"""

import json

import pytest
from experiment_scripts import load_script

from arc_jax.data import paths
from arc_jax.train import train_and_evaluate

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


def test_tree_arc_trains_one_epoch_then_evaluates_acc_cf_ex(tree_run, capsys):
  run, summary = tree_run
  assert summary["status"] == "completed" and summary["steps"] == 3
  assert summary["selection"] == "dev_cf_acc" and summary["test"]["examples"] == 20
  logs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
  assert [r["kind"] for r in logs] == ["train"] * 3 + ["epoch"]
  assert all(r["lambda"] == 0.5 and r["eps"] == 1.0 and "train_cf_acc" in r for r in logs)

  evaluate(run)  # a Tree-LSTM run's metrics: acc, cf, ex
  results = json.loads((run / "eval" / "test_Del2Sub2.json").read_text())
  metrics = results["metrics"]
  assert sorted(metrics) == ["acc", "cf", "ex"] and {m["total"] for m in metrics.values()} == {20}
  assert metrics["cf"]["count"] <= metrics["ex"]["count"] <= metrics["acc"]["count"]
  assert metrics["acc"]["count"] == summary["test"]["correct"]
  assert metrics["cf"]["count"] == summary["test"]["certified"]
  # Every correct, uncertified tree had S(t) enumerated beyond t.
  assert metrics["ex"]["enumerated"] == metrics["acc"]["count"] - metrics["cf"]["count"]
  assert results["checkpoint"] == {"which": "best", "step": 3, "epoch": 0}

  # Settings that do not fit the run exit with status 2 and a message that names the fix.
  capsys.readouterr()
  evaluate(run, "--metrics", "hf", status=2)
  assert "error: Metrics ['hf'] are not available for 'tree_lstm'" in capsys.readouterr().err
  evaluate(run, "--synonyms", "counterfitted", status=2)  # trained vectors: the run's lexicon
  assert "trained its word vectors" in capsys.readouterr().err


def test_tree_exhaustive_audit_enumerates_certified_trees_and_agrees(tree_run):
  run, summary = tree_run
  evaluate(run, "--metrics", "ex")
  evaluate(run, "--metrics", "acc,ex", "--no-shortcut")
  shortcut = json.loads((run / "eval" / "test_Del2Sub2_cf_ex.json").read_text())["metrics"]
  audit = json.loads((run / "eval" / "test_Del2Sub2_audit.json").read_text())["metrics"]
  assert audit["cf"]["count"] == summary["test"]["certified"] > 0
  assert audit["ex"]["audit_failures"] == []
  assert audit["ex"]["enumerated"] == audit["acc"]["count"]  # the certified trees too
  assert audit["ex"]["count"] == shortcut["ex"]["count"]
  assert audit["ex"]["members_evaluated"] > shortcut["ex"]["members_evaluated"]
