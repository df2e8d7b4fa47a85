"""Every committed per-example table agrees with the counts of the results file that names it."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from arc_jax import per_example

RESULTS = pathlib.Path(__file__).resolve().parents[1] / "results"
WITH_TABLES = sorted(p for p in RESULTS.glob("*/eval/*.json")
                     if "per_example_file" in json.loads(p.read_text()))


def test_some_results_have_tables():
  assert WITH_TABLES, "no committed results file names a per-example table"


@pytest.mark.parametrize("path", WITH_TABLES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_table_matches_its_results(path):
  results = json.loads(path.read_text())
  table = per_example.read(path)
  assert table["id"] == list(range(results["examples"]))
  assert max(table["space_size"]) == results["space_size"]["max"]
  for name, metric in results["metrics"].items():
    assert len(table[name]) == metric["total"] and sum(table[name]) == metric["count"], name
  if "acc" in table:
    assert table["acc"] == [int(p == y) for p, y in zip(table["prediction"], table["label"])]
  if "cf" in table:
    assert all((m > 0) == bool(c) for m, c in zip(table["cf_margin"], table["cf"]))


REEVALUATE = """if True:
    import json, sys
    from arc_jax.evaluation import evaluate_run
    run, space, first = sys.argv[1:]
    results = evaluate_run(run, space=space, first=int(first), metrics=["acc", "cf"],
                           progress=False)
    print(json.dumps({"checkpoint": results["checkpoint"], "table": results["per_example"]}))"""


@pytest.mark.parametrize("run", ["arc_lstm_sub3", "normal_lstm"])
def test_kept_model_reevaluated_gives_its_table_bit_for_bit(run):
  """A kept model evaluated again (today's code, its config read through the migration of the
  flat layout) gives every margin, prediction and outcome of its committed table exactly.

  In a process of its own with XLA's default optimisation level, as the table was made:
  tests/conftest.py lowers it for compile time, which moves float32 margins by an ulp or so."""
  path = RESULTS / run / "eval" / "test_first100_Sub3_acc_cf.json"
  committed = json.loads(path.read_text())
  env = dict(os.environ)
  flags = [f for f in env.pop("XLA_FLAGS", "").split()
           if f != "--xla_backend_optimization_level=0"]
  if flags:
    env["XLA_FLAGS"] = " ".join(flags)
  done = subprocess.run([sys.executable, "-c", REEVALUATE, str(RESULTS / run),
                         committed["space"], str(committed["first"])], capture_output=True,
                        text=True, env=env, cwd=RESULTS.parent)
  assert done.returncode == 0, done.stderr[-3000:]
  again = json.loads(done.stdout.splitlines()[-1])
  assert again["checkpoint"] == committed["checkpoint"]
  assert again["table"] == per_example.read(path)
