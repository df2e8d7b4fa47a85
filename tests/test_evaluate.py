"""End to end on real SST-2: train one epoch of the default config on 256 sentences, then
evaluate Acc, CF, EX and HF on 64 test sentences with experiments/evaluate.py (and audit mode);
skipped when the real data cannot be found (see arc_jax.data.paths). Without data: the
consistency check CF ≤ EX ≤ HF ≤ Acc and the argument errors.
"""

import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from tests.helpers.experiment_scripts import load_script
from flax import nnx

import arc_jax
from arc_jax import metrics as metric_registry
from arc_jax import per_example
from arc_jax.attacks import Journal
from arc_jax.certify import certify
from tests.helpers.real_data import requires_data
from arc_jax.evaluation import (EvaluationError, _check, evaluate_run, load_experiment,
                                results_path)
from arc_jax.metrics import summarize_space_sizes
from arc_jax.train import ConfigError, RunExistsError, train_and_evaluate


def smoke_config():
  config = load_script("configs/arc").get_config()
  config.num_train, config.num_dev, config.num_test = 256, 64, 64
  config.num_epochs = 1
  config.progress = False
  return config


@requires_data
def test_train_one_epoch_then_evaluate_acc_cf_ex_hf(tmp_path, monkeypatch):
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
  assert evaluate.main(["--workdir", str(run), "--metrics", "acc,cf,ex,hf", "--beam", "3",
                        "--output", str(output), "--no-progress"]) == 0
  results = json.loads(output.read_text())
  kept = json.loads((run / "eval" / "test_Del2Sub2.json").read_text())
  assert results.pop("per_example_file") == "results.examples.tsv.gz"
  assert kept.pop("per_example_file") == "test_Del2Sub2.examples.tsv.gz"
  assert results == kept
  assert (per_example.path_for(output).read_bytes()
          == (run / "eval" / "test_Del2Sub2.examples.tsv.gz").read_bytes())
  metrics = results["metrics"]
  # The per-example table: one row per test example, its columns agreeing with the counts.
  table = per_example.read(output)
  assert table["id"] == list(range(64)) and max(table["space_size"]) == results["space_size"]["max"]
  for name in ("acc", "cf", "ex", "hf"):
    assert sum(table[name]) == metrics[name]["count"], name
  assert table["acc"] == [int(p == y) for p, y in zip(table["prediction"], table["label"])]
  assert all((m > 0) == bool(c) for m, c in zip(table["cf_margin"], table["cf"]))
  assert all((m > 0) <= bool(a) for m, a in zip(table["clean_margin"], table["acc"]))
  assert {m["total"] for m in metrics.values()} == {64}
  counts = [metrics[name]["count"] for name in ("cf", "ex", "hf", "acc")]
  assert counts == sorted(counts)
  assert metrics["hf"]["beam"] == 3
  assert metrics["hf"]["counterexamples_found"] == counts[3] - counts[2]
  assert 0 < metrics["hf"]["candidates_evaluated"] <= 3 * counts[3]
  assert metrics["acc"]["count"] == summary["test"]["correct"]
  assert metrics["cf"]["count"] == summary["test"]["certified"]
  assert results["checkpoint"] == {"which": "best", "step": 8, "epoch": 0}
  assert results["empty_examples"]["indices"] == []
  assert results["first"] is None and results["space_size"]["max"] >= results["space_size"]["mean"] >= 1
  # EX keeps its progress in a file that is gone once the results are in; a search that stops
  # before that (here: the file is kept, as by a kill) is resumed from it by the next one.
  assert metrics["ex"]["resumed"] == 0 and not list((run / "eval").glob("*.progress.jsonl"))
  with monkeypatch.context() as patch:
    patch.setattr(Journal, "remove", lambda self: None)
    evaluate_run(run, metrics=["ex"], progress=False, resume=True)
  progress = Path("eval") / "test_Del2Sub2_cf_ex.progress.jsonl"
  assert len((run / progress).read_text().splitlines()) == 1 + 64
  moved = tmp_path / "moved"  # e.g. to another machine: the key names no path
  shutil.copytree(run, moved)
  resumed = evaluate_run(moved, metrics=["ex"], progress=False, resume=True)["metrics"]["ex"]
  assert resumed["resumed"] == 64 and not (moved / progress).exists()
  assert [resumed[k] for k in ("count", "members_evaluated")] == [
      metrics["ex"][k] for k in ("count", "members_evaluated")]

  # The README's one-call loader, as the README writes it, on this run.
  from tests.helpers.readme_blocks import section_blocks  # pylint: disable=import-outside-toplevel
  block = next(b for b in section_blocks("Certify your own model") if "load_run" in b)
  scope = {"arc_jax": arc_jax, "certify": certify}
  exec(block.replace('"runs/arc"', repr(str(run))), scope)  # pylint: disable=exec-used
  assert scope["out"]["certified"].shape == (1,)
  # The whole experiment, here under another space: the same model, the run's test split.
  model, experiment = load_experiment(run, space="[(Sub,1)]")
  assert experiment.space.signature.budgets == (1,)
  assert len(experiment.examples("test")[0]) == 64
  jax.tree.map(np.testing.assert_array_equal, nnx.state(model), nnx.state(arc_jax.load_run(run)[0]))

  assert evaluate.main(["--workdir", str(run), "--metrics", "ex", "--no-shortcut",
                        "--no-progress"]) == 0
  audit = json.loads((run / "eval" / "test_Del2Sub2_cf_ex_audit.json").read_text())
  assert audit["metrics"]["ex"]["audit_failures"] == []
  assert audit["metrics"]["ex"]["count"] == metrics["ex"]["count"]
  # A partial evaluation is named by its metrics and leaves the complete results alone.
  assert evaluate.main(["--workdir", str(run), "--metrics", "hf", "--beam", "3",
                        "--no-progress"]) == 0
  partial = json.loads((run / "eval" / "test_Del2Sub2_hf.json").read_text())
  assert partial["metrics"]["hf"]["count"] == metrics["hf"]["count"]
  assert json.loads((run / "eval" / "test_Del2Sub2.json").read_text()) == {
      **results, "per_example_file": "test_Del2Sub2.examples.tsv.gz"}
  # experiments/per_example.py gives a file written before tables (and before subsets were
  # recorded: no "first") the table its evaluation makes today.
  legacy = run / "eval" / "legacy_hf.json"
  legacy.write_text(json.dumps({k: v for k, v in partial.items()
                                if k not in ("per_example_file", "first")}))
  assert load_script("per_example").main([str(legacy)]) == 0
  assert json.loads(legacy.read_text())["per_example_file"] == "legacy_hf.examples.tsv.gz"
  assert per_example.read(legacy) == per_example.read(run / "eval" / "test_Del2Sub2_hf.json")
  # The complete verifier agrees with enumeration (evaluate checks it per example), on the
  # first 16 sentences: each sub-space shape it certifies is one more compilation, and
  # tests/verify covers the verifier itself.
  assert evaluate.main(["--workdir", str(run), "--metrics", "ex,exact", "--first", "16",
                        "--exact-window-rule", "balanced", "--no-progress"]) == 0
  exact_file = run / "eval" / "test_first16_Del2Sub2_cf_ex_exact.json"
  exact = json.loads(exact_file.read_text())["metrics"]
  assert exact["exact"]["unknowns"] == 0 and exact["ex"]["total"] == 16
  assert exact["exact"]["window_rule"] == "balanced"  # recorded, as per_example.py reruns it
  assert exact["exact"]["count"] == exact["exact"]["proofs"] == exact["ex"]["count"]
  assert exact["exact"]["proofs"] + exact["exact"]["counterexamples"] == 16
  # A new metric is one registry entry: chosen by name, computed after the metrics it needs
  # (reported too), with its own keys, and named in the results file.
  monkeypatch.setitem(metric_registry.REGISTRY, "uncertified", metric_registry.Metric(
      lambda c: metric_registry.Outcome(c.flags["acc"] & ~c.flags["cf"], {"note": "toy"}),
      needs=("acc", "cf"), default=False))
  toy = evaluate_run(run, metrics=["uncertified"], progress=False)
  assert list(toy["metrics"]) == ["acc", "cf", "uncertified"]
  assert toy["metrics"]["uncertified"]["count"] == counts[3] - counts[0]
  assert toy["metrics"]["uncertified"]["note"] == "toy"
  assert results_path(run, toy, True).name == "test_Del2Sub2_acc_cf_uncertified.json"


def flags(**per_example):
  return {name: np.array(values, bool) for name, values in per_example.items()}


def test_check_catches_a_violated_order_per_example():
  results = {"metrics": {}}
  ordered = dict(cf=[1, 0, 0, 0], ex=[1, 1, 0, 0], hf=[1, 1, 1, 0], acc=[1, 1, 1, 1])
  _check(results, flags(**ordered))
  # Equal counts (ex 2, hf 2), but example 1 is EX-robust and not HF-robust.
  with pytest.raises(EvaluationError, match=r"1 example\(s\) pass ex but fail hf \(ex 2, hf 2; "
                     r"first indices \[1\]\)") as caught:
    _check(results, flags(**dict(ordered, hf=[1, 0, 1, 0])))
  assert caught.value.results is results
  with pytest.raises(EvaluationError, match=r"pass hf but fail acc \(hf 3, acc 2"):
    _check(results, flags(**dict(ordered, acc=[1, 1, 0, 0])))
  with pytest.raises(EvaluationError, match="pass cf but fail ex"):
    _check(results, flags(**dict(ordered, cf=[0, 0, 1, 0])))
  # Metrics not computed are skipped: CF is compared with HF directly.
  with pytest.raises(EvaluationError, match="pass cf but fail hf"):
    _check(results, flags(cf=[1, 0], hf=[0, 1], acc=[1, 1]))
  _check(results, flags(hf=[0, 1], acc=[1, 1]))
  # exact sits between cf and ex, and its counterexamples must not be EX-robust.
  _check(results, flags(**ordered, exact=[1, 1, 0, 0], exact_refuted=[0, 0, 1, 0]))
  with pytest.raises(EvaluationError, match="pass exact but fail ex"):
    _check(results, flags(**ordered, exact=[1, 1, 1, 0]))
  with pytest.raises(EvaluationError, match=r"1 example\(s\) refuted by exact are EX-robust"):
    _check(results, flags(**ordered, exact=[1, 0, 0, 0], exact_refuted=[0, 1, 0, 0]))


def test_the_registry_gives_each_model_its_metrics_and_what_they_need():
  assert metric_registry.METRICS == ("acc", "cf", "ex", "hf", "exact")
  assert metric_registry.defaults("lstm") == metric_registry.defaults("tree_lstm") == (
      "acc", "cf", "ex", "hf")
  assert metric_registry.available("lstm")[-1] == "exact"
  assert "exact" not in metric_registry.available("tree_lstm")
  assert metric_registry.with_needs(["hf", "ex"]) == ("cf", "ex", "hf")


def test_unknown_metrics_and_bad_beam_name_the_fix(tmp_path):
  with pytest.raises(ConfigError,
                     match=r"\['hotflip'\]; choose from \('acc', 'cf', 'ex', 'hf', 'exact'\)"):
    evaluate_run(tmp_path, metrics=["acc", "hotflip"])
  with pytest.raises(ConfigError, match=r"^Unknown metrics \['space_size'\]; choose from .*\.$"):
    evaluate_run(tmp_path, metrics=["space_size"])  # a summary every results file has
  with pytest.raises(ConfigError, match=r"beam=0: .* pass beam >= 1 \(--beam"):
    evaluate_run(tmp_path, metrics=["hf"], beam=0)
  with pytest.raises(ConfigError, match=r"first=0: evaluate at least one example; pass --first N"):
    evaluate_run(tmp_path, first=0)


def test_space_size_statistics_and_subset_file_names(tmp_path):
  sizes = [1, 3, 10 ** 30, 6]
  assert summarize_space_sizes(sizes) == {"max": 10 ** 30, "median": 4.5,
                                "mean": pytest.approx(2.5e29, rel=1e-12),
                                "counts": "application choices"}
  results = {"split": "test", "space": "[(Sub,3)]", "model": "lstm", "first": 100,
             "metrics": {"acc": {}, "cf": {}}}
  assert results_path(tmp_path, results, True) == tmp_path / "eval" / "test_first100_Sub3_acc_cf.json"
  results["first"] = None
  assert results_path(tmp_path, results, False).name == "test_Sub3_acc_cf_audit.json"
  # A lexicon other than the run's own is named by what differs.
  (tmp_path / "config.json").write_text(json.dumps({"synonyms": "ppdb", "max_candidates": 1}))
  results.update(synonyms="ppdb", max_candidates=1)
  assert results_path(tmp_path, results, True).name == "test_Sub3_acc_cf.json"
  results.update(max_candidates=0)
  assert results_path(tmp_path, results, True).name == "test_Sub3_allcandidates_acc_cf.json"
  results.update(synonyms="counterfitted", max_candidates=2)
  assert (results_path(tmp_path, results, True).name
          == "test_Sub3_counterfitted_candidates2_acc_cf.json")
