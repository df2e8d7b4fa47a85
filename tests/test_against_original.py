"""benchmarks/against_original.py's pure parts (no torch, no original checkout needed)."""

import importlib.util
from pathlib import Path

import numpy as np

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "against_original.py"
_spec = importlib.util.spec_from_file_location("against_original", _PATH)
against_original = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(against_original)


def test_compare_counts_verdicts_and_logit_difference():
  labels = [1, 0, 1, 0, 1]
  ours_cert = [True, True, False, False, True]
  theirs_cert = [True, False, False, True, False]
  ours_logit = [2.0, -1.0, 0.5, -3.0, 1.0]
  theirs_logit = [2.0 + 1e-6, -1.0, 0.5 - 3e-6, -3.0, np.nan]  # the last one skipped
  summary = against_original.compare(labels, ours_cert, [1.0, 0.5, -0.1, -0.2, 0.3], ours_logit,
                                     theirs_cert, [0.9, -0.1, -0.5, 0.1, np.nan], theirs_logit)
  assert summary["sentences"] == 5 and summary["compared"] == 4
  assert summary["skipped_by_original"] == [4]
  assert (summary["certified_both"], summary["certified_only_arc_jax"],
          summary["certified_only_original"], summary["certified_neither"]) == (1, 1, 1, 1)
  assert summary["ids_only_original"] == [3]
  assert summary["prediction_differs"] == []
  assert abs(summary["max_abs_logit_diff"] - 3e-6) < 1e-9
  assert summary["accuracy_arc_jax"] == summary["accuracy_original"] == 1.0
  assert summary["margin_original_higher"] == 1  # sentence 3: −0.2 < 0.1
  gap = summary["margin_arc_jax_minus_original"]
  assert np.isclose(gap["min"], -0.3) and np.isclose(gap["max"], 0.6)


def test_compare_reports_differing_predictions():
  summary = against_original.compare([1, 1], [False, False], [0.0, 0.0], [0.1, -0.2],
                                     [False, False], [0.0, 0.0], [-0.1, -0.2], ids=[7, 8])
  assert summary["prediction_differs"] == [7]


def test_space_tag():
  assert against_original.space_tag("[(Del,2),(Sub,2)]") == "del2sub2"
  assert against_original.space_tag("[(Sub, 2), (Ins, 2)]") == "sub2ins2"


def test_patched_source_adds_the_ins_fix_once(tmp_path):
  src = tmp_path / "orig" / "src"
  src.mkdir(parents=True)
  (src / "ibp.py").write_text(
      "def f(idxs):\n"
      "    for idxs_idx, i in enumerate(idxs):\n"
      "        if ins_extend_special_pre is not None:\n"
      "            pass\n"
      "        ins_extend_special_pre = 1\n")
  copy, patched = against_original.patched_source(tmp_path / "orig", tmp_path / "tmp")
  text = (copy / "ibp.py").read_text()
  assert patched and text.count(against_original.INS_FIX) == 1
  assert text.index(against_original.INS_FIX) < text.index("for idxs_idx")
  namespace = {}
  exec(compile(text, "ibp.py", "exec"), namespace)
  namespace["f"]([0, 1])  # no UnboundLocalError
  again, patched_again = against_original.patched_source(copy.parent, tmp_path / "tmp2")
  assert not patched_again


def test_summarize_file_rebuilds_the_summary(tmp_path):
  rows = [{"id": 0, "label": 1, "certified_arc_jax": True, "certified_original": True,
           "margin_lb_arc_jax": 1.0, "margin_lb_original": 0.5, "logit_arc_jax": 2.0,
           "logit_original": 2.0},
          {"id": 1, "label": 0, "certified_arc_jax": True, "certified_original": None,
           "margin_lb_arc_jax": 1.0, "margin_lb_original": None, "logit_arc_jax": -2.0,
           "logit_original": None}]
  path = tmp_path / "r.json"
  path.write_text(__import__("json").dumps({"run": "x", "sentences": rows}))
  summary = against_original.summarize_file(path)
  assert summary["certified_both"] == 1 and summary["skipped_by_original"] == [1]
  assert __import__("json").loads(path.read_text())["summary"] == summary


def test_dump_round_trips():
  data = {"run": "x", "summary": {"a": 1}, "sentences": [{"id": 0}, {"id": 1}]}
  text = against_original.dump(data)
  assert __import__("json").loads(text) == data and text.count("\n") == 10


def test_unrounded_summary():
  out = against_original.unrounded_summary([1.0, 0.5, 0.2], [1.0, 0.6, np.nan])
  assert out["margin_original_higher_than_unrounded"] == 1
  assert np.isclose(out["margin_unrounded_minus_original_min"], -0.1)
