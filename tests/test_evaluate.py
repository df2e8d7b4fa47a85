"""End to end on real SST-2: train one epoch of the default config on 256 sentences, then
evaluate Acc, CF and EX on 64 test sentences with experiments/evaluate.py (and audit mode).

Skipped when the real data cannot be found (see arc_jax.data.paths).
"""

import importlib.util
import json
from pathlib import Path

import pytest

from arc_jax.data import paths
from arc_jax.train import RunExistsError, train_and_evaluate

try:
  paths.find_data_file("sst2/train.tsv.gz")
except paths.DataFileNotFoundError as missing:
  pytest.skip(f"real data not found: {missing}", allow_module_level=True)

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def load_script(name):
  spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def smoke_config():
  config = load_script("configs/arc").get_config()
  config.num_train, config.num_dev, config.num_test = 256, 64, 64
  config.num_epochs = 1
  config.progress = False
  return config


def test_train_one_epoch_then_evaluate_acc_cf_ex(tmp_path):
  run = tmp_path / "run"
  summary = train_and_evaluate(smoke_config(), run)
  assert summary["status"] == "completed" and summary["steps"] == 8
  assert summary["test"]["examples"] == 64 and summary["selection"] == "dev_cf_acc"
  epochs = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
  assert [r["kind"] for r in epochs][-1] == "epoch" and epochs[-1]["lambda"] == 0.0
  with pytest.raises(RunExistsError, match="--overwrite"):
    train_and_evaluate(smoke_config(), run)

  evaluate = load_script("evaluate")
  output = tmp_path / "results.json"
  assert evaluate.main(["--workdir", str(run), "--metrics", "acc,cf,ex", "--output", str(output),
                        "--no-progress"]) == 0
  results = json.loads(output.read_text())
  assert results == json.loads((run / "eval" / "test_Del2Sub2.json").read_text())
  metrics = results["metrics"]
  assert {m["total"] for m in metrics.values()} == {64}
  assert metrics["cf"]["count"] <= metrics["ex"]["count"] <= metrics["acc"]["count"]
  assert metrics["acc"]["count"] == summary["test"]["correct"]
  assert metrics["cf"]["count"] == summary["test"]["certified"]
  assert results["checkpoint"] == {"which": "best", "step": 8, "epoch": 0}
  assert results["empty_examples"]["indices"] == []

  assert evaluate.main(["--workdir", str(run), "--metrics", "ex", "--no-shortcut",
                        "--no-progress"]) == 0
  audit = json.loads((run / "eval" / "test_Del2Sub2_audit.json").read_text())
  assert audit["metrics"]["ex"]["audit_failures"] == []
  assert audit["metrics"]["ex"]["count"] == metrics["ex"]["count"]
