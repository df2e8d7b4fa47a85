"""Every committed per-example table agrees with the counts of the results file that names it."""

import json
import pathlib

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
