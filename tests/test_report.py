"""experiments/report.py: rows come from the JSON files, paper numbers from the matching row."""

import json
from pathlib import Path

import pytest
from tests.helpers.experiment_scripts import load_script

report = load_script("report")


def write_run(folder: Path, config: dict, results: dict[str, dict]) -> None:
  folder.mkdir()
  (folder / "config.json").write_text(json.dumps(config))
  (folder / "summary.json").write_text(json.dumps({"status": "completed"}))
  for name, content in results.items():
    (folder / name).write_text(json.dumps(content))


def metric(value):
  return {"value": value, "count": 0, "total": 1, "seconds": 0.0}


def test_space_key_ignores_order_spacing_and_dup_alias():
  assert report.space_key("[(Sub,2), (Del,2)]") == report.space_key("[(Del,2),(Sub,2)]")
  assert report.space_key("[(Dup,2),(Sub,2)]") == report.space_key("[(Sub,2),(Ins,2)]")
  assert report.space_key("[(Sub,1)]") != report.space_key("[(Sub,2)]")
  with pytest.raises(ValueError, match="No \\(Name,δ\\) pairs"):
    report.space_key("Del")


def test_table_has_measured_and_paper_numbers(tmp_path, capsys):
  write_run(tmp_path / "arc_bi", {"method": "arc", "bidirectional": True},
            {"test_Del2Sub2.json": {"space": "[(Del,2),(Sub,2)]", "split": "test",
                                    "metrics": {"acc": metric(0.8312), "cf": metric(0.7),
                                                "ex": metric(0.75)}}})
  write_run(tmp_path / "tree_normal", {"method": "normal", "model": "tree_lstm"},
            {"test_Sub3.json": {"space": "[(Sub,3)]", "split": "test",
                                "metrics": {"acc": metric(0.5)}}})
  assert report.main([str(tmp_path / "arc_bi"), str(tmp_path / "tree_normal")]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 4  # header, rule, two rows (config.json and summary.json are no rows)
  assert "| bilstm | arc |" in lines[2] and "| 83.1 | – | 70.0 | 75.0 |" in lines[2]
  assert lines[2].endswith("| 83.5 / 78.7 / 70.9 / 77.5 |")
  assert "| tree | normal |" in lines[3] and lines[3].endswith("| – |")  # no paper row for Sub3


def test_folder_without_config_is_refused(tmp_path):
  with pytest.raises(SystemExit):
    report.main([str(tmp_path)])


def test_arc_a3t_rows_name_the_abstracted_part_and_the_appendix_numbers(tmp_path, capsys):
  write_run(tmp_path / "abs_ins", {"method": "arc_a3t", "abstracted": "Ins"},
            {"test_Sub2Ins2.json": {"space": "[(Sub,2),(Ins,2)]", "split": "test",
                                    "metrics": {"acc": metric(0.8), "cf": metric(0.2),
                                                "ex": metric(0.6)}}})
  assert report.main([str(tmp_path / "abs_ins")]) == 0
  row = capsys.readouterr().out.splitlines()[2]
  assert "| lstm | arc_a3t(Ins) |" in row and row.endswith("| 82.6 / – / 15.9 / 66.7 |")


def test_installed_report_prints_no_paper_numbers_unless_given_a_table(tmp_path, capsys):
  from arc_jax.cli import report as installed  # noqa: PLC0415
  write_run(tmp_path / "arc_bi", {"method": "arc", "bidirectional": True},
            {"test_Del2Sub2.json": {"space": "[(Del,2),(Sub,2)]", "split": "test",
                                    "metrics": {"acc": metric(0.8312)}}})
  assert installed.main([str(tmp_path / "arc_bi")]) == 0
  assert capsys.readouterr().out.splitlines()[2].endswith("| – |")
  paper = tmp_path / "table.py"
  paper.write_text('TABLES_2_3 = {("bilstm", "arc", "Del2Sub2"): (1.0, 2.0, None, 4.0)}\n')
  assert installed.main([str(tmp_path / "arc_bi"), "--paper", str(paper)]) == 0
  assert capsys.readouterr().out.splitlines()[2].endswith("| 1.0 / 2.0 / – / 4.0 |")
  with pytest.raises(SystemExit):
    installed.main([str(tmp_path / "arc_bi"), "--paper", str(tmp_path / "none.py")])


def test_intervals_and_paired_tests_from_per_example_tables(tmp_path, capsys):
  from arc_jax import per_example  # noqa: PLC0415
  from arc_jax.cli import report as installed  # noqa: PLC0415
  cf = {"arc": [1, 1, 1, 1, 1, 1, 1, 0], "normal": [0, 0, 0, 0, 0, 0, 1, 0]}
  for method, flags in cf.items():
    folder = tmp_path / method
    write_run(folder, {"method": method}, {})
    (folder / "eval").mkdir()
    per_example.write({"id": list(range(8)), "cf": flags}, folder / "eval" / "t.examples.tsv.gz")
    (folder / "eval" / "t.json").write_text(json.dumps({
        "space": "[(Del,2),(Sub,2)]", "split": "test", "first": None,
        "per_example_file": "t.examples.tsv.gz",
        "metrics": {"cf": {"value": sum(flags) / 8, "count": sum(flags), "total": 8}}}))
  assert installed.main([str(tmp_path / "arc"), str(tmp_path / "normal"), "--intervals",
                         "--paired"]) == 0
  out = capsys.readouterr().out
  assert "| 87.5 [52.9, 97.8] |" in out  # Wilson's 95% interval of 7 / 8
  # ARC certifies 6 examples the baseline does not, the baseline none ARC does not: 2 / 2^6.
  assert "| arc | normal (normal) | CF | 6 | 0 | 0.0312 |" in out


def test_verifier_results_show_their_exact_rate_and_its_upper_end(tmp_path, capsys):
  """A results file of the complete verifier alone (metrics {"exact"}) is a row with its
  numbers, not dashes; sentences left unknown give the upper end."""
  exact = {"value": 0.7, "count": 7, "total": 10, "proofs": 7, "unknowns": 2,
           "counterexamples": 1}
  write_run(tmp_path / "arc", {"method": "arc"},
            {"test_Ins5Sub5_exact.json": {"space": "[(Ins,5),(Sub,5)]", "split": "test",
                                          "metrics": {"exact": exact}},
             "test_Ins3Sub3_exact.json": {"space": "[(Ins,3),(Sub,3)]", "split": "test",
                                          "metrics": {"exact": {**exact, "unknowns": 0}}}})
  assert report.main([str(tmp_path / "arc")]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert "| Acc | HF | CF | EX | exact |" in lines[0]
  assert "| – | – | – | – | 70.0 | –" in lines[2]  # test_Ins3Sub3_exact.json
  assert "| – | – | – | – | 70.0 (≤ 90.0) | –" in lines[3]


def test_every_committed_verifier_file_has_numbers_in_the_report(capsys):
  """No results file of results/ is a row of dashes (issue 45: the verifier's were)."""
  results = Path(__file__).resolve().parents[1] / "results"
  folders = sorted(p for p in results.iterdir() if (p / "config.json").exists())
  assert report.main([str(f) for f in folders]) == 0
  rows = capsys.readouterr().out.splitlines()[2:]
  assert any("_exact.json" in row for row in rows)
  for row in rows:
    measured = [cell.strip() for cell in row.split("|")[6:11]]
    assert set(measured) != {"–"}, row
