"""Every committed per-example table agrees with the counts of the results file that names it."""

import json
import pathlib

import numpy as np
import pytest

from arc_jax import per_example
from tests.helpers.real_data import requires_data

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
  if "space_size" in results:  # files from before it was recorded have the table's only
    assert max(table["space_size"]) == results["space_size"]["max"]
  for name, metric in results["metrics"].items():
    assert len(table[name]) == metric["total"] and sum(table[name]) == metric["count"], name
  if "acc" in table:
    assert table["acc"] == [int(p == y) for p, y in zip(table["prediction"], table["label"])]
  if "cf" in table:
    assert all((m > 0) == bool(c) for m, c in zip(table["cf_margin"], table["cf"]))


MARGIN_RTOL, MARGIN_ATOL = 1e-5, 1e-4
"""How far a re-evaluation's float32 margins may sit from the committed ones. The tables were made
on one CPU; another's matmul kernels and vector code round differently, and so does the suite's
optimisation level (tests/conftest.py): measured up to 1.6e-5 on an AVX-512 AMD EPYC against the
committed tables of both runs below, every prediction and outcome the same."""


@requires_data
@pytest.mark.parametrize("run", ["arc_lstm_sub3", "normal_lstm"])
def test_kept_model_reevaluated_gives_its_table(run):
  """A kept model evaluated again (today's code, its config read through the migration of the
  flat layout) gives every prediction and outcome of its committed table exactly, and its
  margins to float32 rounding (:data:`MARGIN_ATOL`)."""
  from arc_jax.evaluation import evaluate_run  # pylint: disable=import-outside-toplevel
  path = RESULTS / run / "eval" / "test_first100_Sub3_acc_cf.json"
  committed = json.loads(path.read_text())
  again = evaluate_run(RESULTS / run, space=committed["space"], first=committed["first"],
                       metrics=["acc", "cf"], progress=False)
  assert again["checkpoint"] == committed["checkpoint"]
  fresh, table = again["per_example"], per_example.read(path)
  assert fresh.keys() == table.keys()
  for name, column in table.items():
    if name.endswith("_margin"):
      np.testing.assert_allclose(fresh[name], column, rtol=MARGIN_RTOL, atol=MARGIN_ATOL,
                                 err_msg=name)
    else:
      assert fresh[name] == column, name
