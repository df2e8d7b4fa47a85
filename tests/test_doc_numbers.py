"""The results quoted in the README and docs/HOW_IT_WORKS.md are the committed evaluation files'.

Each table row names its kept run (or, for the δ table, its δ); every cell is compared with the
rate of the matching metric, rounded as the tables round (one decimal of a percentage), so a
retrained model or an edited number fails here until the other side follows.
"""

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def _space_key(spec):
  """A space spec as the set of its (transformation, budget) pairs: the order does not matter."""
  return frozenset(re.findall(r"\((\w+),(\d+)\)", spec))


def _evaluations(run, spec):
  """The run's committed test-set evaluations (whole split) of the space ``spec``."""
  for path in sorted((RESULTS / run / "eval").glob("test_*.json")):
    record = json.loads(path.read_text())
    if record.get("first") is None and _space_key(record["space"]) == _space_key(spec):
      yield record


def _rates(run, spec):
  """{metric: (percentage rounded to 0.1, metric record)} over the run's evaluations of ``spec``;
  a metric measured twice must agree."""
  rates = {}
  for record in _evaluations(run, spec):
    for name, metric in record["metrics"].items():
      rate = (round(100 * metric["value"], 1), metric)
      assert rates.setdefault(name, rate)[0] == rate[0], (run, spec, name)
  return rates


def _table_rows(text, header_start):
  """The body rows of the markdown table whose header line starts with ``header_start``, as cell
  lists."""
  lines = text[text.index(header_start):].splitlines()
  rows = []
  for line in lines[2:]:
    if not line.startswith("|"):
      break
    rows.append([cell.strip() for cell in line.strip("|").split("|")])
  return rows


def test_readme_results_table_matches_the_kept_runs():
  rows = _table_rows((ROOT / "README.md").read_text(), "| SST-2 test, `[(Del,2),(Sub,2)]`, LSTM")
  assert len(rows) == 3
  for row in rows:
    run = re.search(r"results/([a-z0-9_]+)", row[0]).group(1)
    rates = _rates(run, "[(Del,2),(Sub,2)]")
    for cell, metric in zip(row[1:5], ("acc", "hf", "cf", "ex")):
      assert float(cell) == rates[metric][0], (run, metric, cell, rates[metric][0])


def test_delta_table_matches_the_verifier_runs():
  text = (ROOT / "docs" / "HOW_IT_WORKS.md").read_text()
  rows = _table_rows(text, "| δ | largest")
  assert [row[0] for row in rows] == ["1", "2", "3", "4", "5"]
  for row in rows:
    delta = int(row[0])
    spec = f"[(Ins,{delta}),(Sub,{delta})]"
    rates = _rates("arc_lstm_sub2ins2", spec)
    largest = max(record["space_size"]["max"] for record in _evaluations("arc_lstm_sub2ins2", spec))
    assert int(row[1].replace(",", "")) == largest
    for cell, metric in zip(row[2:7], ("acc", "hf", "cf", "ex", "exact")):
      if not cell:
        # A blank is a metric not measured at this δ; EX is never run beyond δ = 2.
        assert metric not in rates, (delta, metric)
        continue
      assert float(cell.split()[0]) == rates[metric][0], (delta, metric, cell)
    exact = rates["exact"][1]
    assert int(row[7]) == exact["unknowns"]
    if exact["unknowns"]:  # the upper end counts every unknown as robust
      upper = round(100 * (exact["count"] + exact["unknowns"]) / exact["total"], 1)
      assert f"(≤ {upper})" in row[6]
    assert int(row[8].rstrip(" s").replace(",", "")) == round(exact["seconds"])


@pytest.mark.parametrize("delta", [3, 4, 5])
def test_no_enumeration_beyond_delta_two(delta):
  """The docs say EX is not run from δ = 3 on; the committed files agree."""
  assert "ex" not in _rates("arc_lstm_sub2ins2", f"[(Ins,{delta}),(Sub,{delta})]")


def test_against_original_table_matches_its_json():
  rows = _table_rows((ROOT / "docs" / "HOW_IT_WORKS.md").read_text(),
                     "| kept model, space | certified by both")
  runs = {"ARC LSTM": {"[(Del,2),(Sub,2)]": "arc_lstm_del2sub2", "[(Sub,2),(Ins,2)]":
                       "arc_lstm_sub2ins2", "[(Del,2),(Ins,2)]": "arc_lstm_del2ins2"},
          "Normal LSTM": dict.fromkeys(("[(Del,2),(Sub,2)]", "[(Sub,2),(Ins,2)]",
                                        "[(Del,2),(Ins,2)]"), "normal_lstm")}
  assert len(rows) == 6
  for row in rows:
    kind, spec = (part.strip(" `") for part in row[0].split(",", 1))
    files = [p for p in (RESULTS / "benchmarks").glob("against_original_*.json")
             if json.loads(p.read_text())["run"] == f"results/{runs[kind][spec]}"
             and _space_key(json.loads(p.read_text())["space"]) == _space_key(spec)]
    assert len(files) == 1, row
    summary = json.loads(files[0].read_text())["summary"]
    assert summary["compared"] == 1821 and not summary["prediction_differs"]
    assert [int(c.replace(",", "")) for c in row[1:4]] == [
        summary["certified_both"], summary["certified_only_arc_jax"],
        summary["certified_only_original"]], row
