"""results/README.md's uncertainty: Wilson intervals on every rate, mean ± sd over seeds, and the
paired McNemar table, on fake results files (the committed ones: tests/test_doc_numbers.py)."""

import json
import statistics
import sys

import pytest
from tests.helpers.experiment_scripts import load_script

from arc_jax import per_example, stats

reproduce = load_script("reproduce")
readme_tables = sys.modules[reproduce.tables.__module__]  # experiments/readme_tables.py

SPACE = "[(Del,2),(Sub,2)]"


def _cell(cell_id):
  return next(c for c in reproduce.cells() if c.id == cell_id)


def _write_run(results, name, counts, examples=10, kept=True, outcomes=None):
  """A run folder with one evaluation of ``SPACE``: ``counts`` maps metric to count; with
  ``outcomes`` (metric → 0/1 list) its per-example table too."""
  folder = results / name
  (folder / "eval").mkdir(parents=True)
  if kept:
    (folder / "model").mkdir()
    (folder / "model" / "meta.json").write_text("{}")
  record = {"split": "test", "space": SPACE, "examples": examples, "max_candidates": 1,
            "first": None, "metrics": {m: {"value": c / examples, "count": c, "total": examples}
                                       for m, c in counts.items()}}
  path = folder / "eval" / "test_Del2Sub2.json"
  if outcomes is not None:
    table = {"id": list(range(examples)), "label": [0] * examples, **outcomes}
    per_example.write(table, per_example.path_for(path))
    record["per_example_file"] = per_example.path_for(path).name
  path.write_text(json.dumps(record))
  return path


def test_mean_sd_is_the_sample_sd():
  values = [74.5, 76.1, 73.0]
  mean, sd = stats.mean_sd(values)
  assert mean == pytest.approx(statistics.mean(values))
  assert sd == pytest.approx(statistics.stdev(values))
  with pytest.raises(ValueError, match="at least two"):
    stats.mean_sd([74.5])
  assert stats.format_p(0.0) == "< 1e-300" and stats.format_p(3.4731e-18) == "3.47e-18"


def test_rates_carry_their_wilson_interval(tmp_path, monkeypatch):
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path)
  _write_run(tmp_path, "normal_lstm", {"acc": 9, "cf": 0, "ex": 5, "hf": 10})
  cell = _cell("table_2/lstm_normal/del2sub2")
  table = readme_tables.tables([cell], tmp_path / "runs", intervals=True)
  assert ("| 90.0 [59.6, 98.2] | 100.0 [72.2, 100.0] | 0.0 [0.0, 27.8] | 50.0 [23.7, 76.3] |"
          in table)
  # Without intervals (arc-report's plain table, tests/test_reproduce.py) the rates stand alone.
  assert "| 90.0 | 100.0 | 0.0 | 50.0 |" in readme_tables.tables([cell], tmp_path / "runs")


def test_three_seeds_give_mean_and_sd_below_the_single_run(tmp_path, monkeypatch):
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path)
  cell = _cell("table_2/lstm_normal/del2sub2")
  metrics = ("acc", "hf", "cf", "ex")
  _write_run(tmp_path, "normal_lstm", dict.fromkeys(metrics, 5))
  table = readme_tables.tables([cell], tmp_path / "runs", intervals=True)
  assert "mean ± sd" not in table  # one seed: the single run only
  _write_run(tmp_path, "normal_lstm_seed2", dict.fromkeys(metrics, 7), kept=False)
  assert readme_tables.over_seeds(cell) is None  # results without a kept model do not count
  _write_run(tmp_path, "normal_lstm_seed1", dict.fromkeys(metrics, 6))
  two = readme_tables.over_seeds(cell)
  assert two["seeds"] == [0, 1] and two["cf"] == pytest.approx((55.0, statistics.stdev([50, 60])))
  (tmp_path / "normal_lstm_seed2" / "model").mkdir()
  (tmp_path / "normal_lstm_seed2" / "model" / "meta.json").write_text("{}")
  seeds = readme_tables.over_seeds(cell)
  assert seeds["seeds"] == [0, 1, 2]
  assert seeds["runs"] == ["normal_lstm", "normal_lstm_seed1", "normal_lstm_seed2"]
  for metric in metrics:
    assert seeds[metric] == pytest.approx((60.0, 10.0))
  table = readme_tables.tables([cell], tmp_path / "runs", intervals=True)
  rows = [line for line in table.splitlines() if line.startswith("| LSTM Normal")]
  assert len(rows) == 2  # the seed-0 run is kept, its mean ± sd row below it
  assert "| normal_lstm (" in rows[0] and "50.0 [23.7, 76.3]" in rows[0]
  assert rows[1].startswith("| LSTM Normal, mean ± sd of seeds 0, 1, 2 | `[(Del,2),(Sub,2)]` | "
                            "normal_lstm, normal_lstm_seed1, normal_lstm_seed2 | ")
  assert "| 60.0 ± 10.0 | 60.0 ± 10.0 | 60.0 ± 10.0 | 60.0 ± 10.0 | 84.6 / 71.9 / 4.6 / 68.9 |" \
      in rows[1]
  assert "CF +55.4" in rows[1] and rows[1].endswith("| 3 seeds |")


def test_paired_table_tests_arc_against_each_baseline_or_says_what_is_missing(tmp_path,
                                                                              monkeypatch):
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path)
  arc_cf = [1, 1, 1, 1, 1, 1, 0, 0, 1, 0]
  arc_ex = [1, 1, 1, 1, 1, 1, 1, 0, 1, 0]
  normal_cf = [0, 0, 0, 0, 0, 0, 0, 1, 1, 0]
  normal_ex = [1, 1, 1, 0, 1, 1, 1, 1, 1, 0]
  _write_run(tmp_path, "arc_lstm_del2sub2", {"acc": 9, "cf": 7, "ex": 8, "hf": 8},
             outcomes={"cf": arc_cf, "ex": arc_ex})
  _write_run(tmp_path, "normal_lstm", {"acc": 9, "cf": 2, "ex": 8, "hf": 8},
             outcomes={"cf": normal_cf, "ex": normal_ex})
  _write_run(tmp_path, "augment_lstm_del2sub2", {"acc": 9, "cf": 2, "ex": 8, "hf": 8})
  cells = [c for c in reproduce.cells() if c.table == "Table 2" and c.column == SPACE]
  tests = readme_tables.paired(cells)
  against = {(t["other"].row, t["metric"]): t for t in tests}
  # Only the LSTM rows of the space were evaluated: HotFlip, Bi-LSTM and tree rows have no file.
  assert set(against) == {(row, m) for row in ("LSTM Normal", "LSTM Data Aug.")
                          for m in ("cf", "ex")}
  cf = against["LSTM Normal", "cf"]
  assert (cf["only_first"], cf["only_second"]) == (6, 1)
  assert cf["p_value"] == stats.mcnemar(arc_cf, normal_cf)["p_value"] == pytest.approx(0.125)
  assert against["LSTM Data Aug.", "cf"]["missing"] == ["the other"]
  table = readme_tables.paired_markdown(tests)
  assert table.startswith("### ARC against each baseline, paired\n")
  assert ("| Table 2 | `[(Del,2),(Sub,2)]` | CF | `arc_lstm_del2sub2/eval/test_Del2Sub2.json` | "
          "LSTM Normal | `normal_lstm/eval/test_Del2Sub2.json` | 6 | 1 | 0.125 |") in table
  assert ("| LSTM Data Aug. | `augment_lstm_del2sub2/eval/test_Del2Sub2.json` | no per-example "
          "table (the other's) | – | – |") in table


def test_table_4_pairs_the_arc_lstm_with_a3t_on_the_papers_cnn(tmp_path, monkeypatch):
  """Table 4 compares across architectures as the paper does (ARC LSTM against the A3T CNN);
  the other tables pair within one architecture only."""
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path)
  arc_ex = [1, 1, 1, 1, 1, 1, 1, 0, 1, 0]
  cnn_ex = [1, 0, 0, 0, 1, 1, 1, 0, 1, 0]
  _write_run(tmp_path, "arc_lstm_del2sub2", {"acc": 9, "cf": 7, "ex": 8, "hf": 8},
             outcomes={"cf": arc_ex, "ex": arc_ex})
  _write_run(tmp_path, "a3t_cnn_del2sub2", {"acc": 9, "cf": 1, "ex": 5, "hf": 6},
             outcomes={"cf": [0] * 10, "ex": cnn_ex})
  cells = [c for c in reproduce.cells() if c.column == SPACE]
  against = {(t["table"], t["other"].row, t["metric"]): t for t in readme_tables.paired(cells)}
  ex = against["Table 4", "A3T (HotFlip) CNN", "ex"]
  assert (ex["only_first"], ex["only_second"]) == (3, 0)
  assert not any(row == "A3T (HotFlip) CNN" for table, row, _ in against if table != "Table 4")
