"""experiments/reproduce.py: every cell of the paper is known, states come from the files, the
generated tables and figures come from the JSON alone."""

import importlib
import json
import sys
import time

import pytest
from tests.helpers.experiment_scripts import load_script

reproduce = load_script("reproduce")
report = load_script("report")


def test_every_cell_of_the_paper_is_known_once():
  cells = reproduce.cells()
  ids = [c.id for c in cells]
  assert len(ids) == len(set(ids))
  table2 = {(c.row, report.space_key(c.column)) for c in cells if c.table == "Table 2"}
  assert len(table2) == 3 * 4 * 3
  for cell in (c for c in cells if c.table in ("Table 2", "Table 3")):
    assert set(cell.paper) == {"acc", "hf", "cf", "ex"}  # the paper has every number
  normal_runs = {c.evaluations[0].run.name for c in cells
                 if c.table == "Table 2" and "Normal" in c.row}
  assert normal_runs == {"normal_lstm", "normal_bilstm", "normal_tree"}  # one per architecture
  assert [c.column for c in cells if c.table == "δ figure"] == [f"δ={d}" for d in range(1, 6)]
  delta_ex = [("ex" in e.metrics) or c.ex_by_verifier for c in cells if c.table == "δ figure"
              for e in c.evaluations if "acc" in e.metrics]
  assert delta_ex == [True, True, True, False, False]  # EX for δ ≤ 3 only (δ = 3: the verifier)
  delta_exact = [any("exact" in e.metrics for e in c.evaluations) for c in cells
                 if c.table == "δ figure"]
  assert delta_exact == [True] * 5  # the complete verifier at every δ
  assert {c.table for c in cells} >= {"Table 3", "Table 4", "Table 5", "[(Sub,3)]",
                                      "ARC-A3T table", "ARC-A3T figures"}
  for run in {e.run for cell in cells for e in cell.evaluations}:  # every run's row exists
    file, _, arg = run.config.partition(":")
    config = importlib.import_module(f"arc_jax.configs.{file.removesuffix('.py')}").get_config(arg)
    if not run.overrides:
      assert config.name == run.name, run


def _results(space, metrics, count=1, examples=10, **extra):
  return {"split": "test", "space": space, "examples": examples, "max_candidates": 1, **extra,
          "metrics": {m: {"value": count / examples, "count": count, "total": examples}
                      for m in metrics}}


def test_states_and_tables_come_from_the_files(tmp_path, monkeypatch):
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path / "results")
  runs = tmp_path / "runs"
  cell = next(c for c in reproduce.cells() if c.id == "table_2/lstm_normal/del2sub2")
  state = reproduce.cell_state(cell, runs, set())
  assert state.state == "missing" and "train normal_lstm" in state.detail

  folder = tmp_path / "results" / "normal_lstm"
  (folder / "eval").mkdir(parents=True)
  (folder / "eval" / "test_Del2Sub2.json").write_text(json.dumps(
      _results("[(Sub,2),(Del,2)]", ("acc", "cf", "ex", "hf"), count=5)))
  state = reproduce.cell_state(cell, runs, set())
  assert "no model" in state.detail  # results without a kept model are not done
  (folder / "model").mkdir()
  (folder / "model" / "meta.json").write_text("{}")
  assert reproduce.cell_state(cell, runs, set()).state == "done"
  assert reproduce.measured(cell) == {m: 50.0 for m in ("acc", "cf", "ex", "hf")}
  table = reproduce.tables([cell], runs)
  assert "| 50.0 | 50.0 | 50.0 | 50.0 | 84.6 / 71.9 / 4.6 / 68.9 |" in table
  assert "ACC -34.6" in table and "CF +45.4" in table

  other_space = next(c for c in reproduce.cells() if c.id == "table_2/lstm_normal/del2ins2")
  assert reproduce.cell_state(other_space, runs, {"normal_lstm"}).state == "running"
  first_100 = next(c for c in reproduce.cells() if c.table == "[(Sub,3)]" and "100" in c.column)
  assert "--first" in first_100.evaluations[0].args()


def test_an_interrupted_ex_is_listed_with_its_progress_and_less_time(tmp_path, monkeypatch):
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path / "results")
  cell = next(c for c in reproduce.cells() if c.id == "table_2/tree_lstm_hotflip/ins2sub2")
  folder = tmp_path / "results" / "hotflip_tree_sub2ins2"
  (folder / "model").mkdir(parents=True)
  (folder / "model" / "meta.json").write_text("{}")
  fresh = reproduce.cell_state(cell, tmp_path / "runs", set())
  assert fresh.state == "missing" and "resumes" not in fresh.detail
  (folder / "eval").mkdir()
  key = {"params": "0", "examples": 2210}
  (folder / "eval" / "test_Sub2Ins2_acc_cf_ex.progress.jsonl").write_text(
      "\n".join([json.dumps(key)] + [json.dumps({"index": i}) for i in range(1105)]) + "\n")
  resumed = reproduce.cell_state(cell, tmp_path / "runs", set())
  assert "Ins2Sub2:acc,cf,ex (EX resumes: 1,105 of 2,210 decided), Ins2Sub2:hf" in resumed.detail
  ex, hf = cell.evaluations
  assert resumed.minutes == pytest.approx(ex.minutes / 2 + hf.minutes)
  assert fresh.minutes == pytest.approx(ex.minutes + hf.minutes)


def test_exact_cells_show_their_unknowns(tmp_path, monkeypatch):
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path / "results")
  cell = next(c for c in reproduce.cells() if c.id == "δ_figure/arc_lstm_ins_2_sub_2/δ_5")
  folder = tmp_path / "results" / cell.evaluations[0].run.name
  (folder / "eval").mkdir(parents=True)
  (folder / "model").mkdir()
  (folder / "model" / "meta.json").write_text("{}")
  exact = _results("[(Ins,5),(Sub,5)]", ("exact",), count=6, space_size={"max": 10**10})
  exact["metrics"]["exact"].update(proofs=6, unknowns=2, counterexamples=2)
  (folder / "eval" / "test_Ins5Sub5_exact.json").write_text(json.dumps(exact))
  assert reproduce.measured(cell) == {"exact": 60.0, "exact_upper": 80.0, "size": 10**10}
  table = reproduce.tables([cell], tmp_path / "runs")
  assert "exact (≤ with unknowns)" in table and "| 60.0 (≤ 80.0) |" in table


def test_ex_comes_from_the_verifier_only_without_unknowns(tmp_path, monkeypatch):
  """At δ = 3 of the δ figure EX is the exact verifier's number when it left nothing unknown."""
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path / "results")
  cell = next(c for c in reproduce.cells() if c.id == "δ_figure/arc_lstm_ins_2_sub_2/δ_3")
  assert cell.ex_by_verifier and all("ex" not in e.metrics for e in cell.evaluations)
  folder = tmp_path / "results" / cell.evaluations[0].run.name
  (folder / "eval").mkdir(parents=True)
  (folder / "eval" / "test_Ins3Sub3_acc_cf_hf.json").write_text(json.dumps(
      _results("[(Ins,3),(Sub,3)]", ("acc", "cf", "hf"), count=9)))
  exact = _results("[(Ins,3),(Sub,3)]", ("exact",), count=7)
  exact["metrics"]["exact"].update(proofs=7, unknowns=1, counterexamples=2)
  path = folder / "eval" / "test_Ins3Sub3_exact.json"
  path.write_text(json.dumps(exact))
  assert "ex" not in reproduce.measured(cell)
  exact["metrics"]["exact"].update(unknowns=0, counterexamples=3)
  path.write_text(json.dumps(exact))
  assert reproduce.measured(cell)["ex"] == reproduce.measured(cell)["exact"] == 70.0
  assert "| 70.0 (verifier) |" in reproduce.tables([cell], tmp_path / "runs")  # and says so
  other = next(c for c in reproduce.cells() if c.id == "δ_figure/arc_lstm_ins_2_sub_2/δ_4")
  assert not other.ex_by_verifier


def test_readme_keeps_the_prose_around_the_generated_tables(tmp_path, monkeypatch):
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path)
  (tmp_path / "README.md").write_text(f"# Results\nbefore\n{reproduce.GENERATED_BEGIN}\nold\n"
                                      f"{reproduce.GENERATED_END}\nafter\n")
  cells = [c for c in reproduce.cells() if c.table == "Table 3"]
  reproduce.write_readme(cells, tmp_path / "runs")
  text = (tmp_path / "README.md").read_text()
  assert text.startswith("# Results\nbefore\n") and text.endswith("after\n")
  assert "old" not in text and "### Table 3" in text and "S_review" in text


def test_only_selects_by_cell_id_or_run_name():
  cells = reproduce.cells()
  assert {c.evaluations[0].run.name for c in reproduce.select(cells, "normal_bilstm")} == \
      {"normal_bilstm"}
  assert all(c.table == "Table 5" for c in reproduce.select(cells, "table_5"))
  with pytest.raises(SystemExit):
    reproduce.main(["--only", "no_such_cell", "--list"])


def test_figures_are_drawn_from_the_json(tmp_path):
  plots = load_script("plots")
  metrics = tmp_path / "metrics.jsonl"
  metrics.write_text("\n".join(json.dumps(r) for r in [
      {"kind": "train", "epoch": 0, "step": 100, "loss": 0.6},
      {"kind": "epoch", "epoch": 0, "step": 200, "lambda": 0.0, "eps": 0.0, "dev_acc": 0.8,
       "dev_cf_acc": 0.1, "best_epoch": 0},
      {"kind": "train", "epoch": 1, "step": 300, "loss": 0.4},
      {"kind": "epoch", "epoch": 1, "step": 400, "lambda": 0.5, "eps": 1.0, "dev_acc": 0.82,
       "dev_cf_acc": 0.5, "best_epoch": 1}]) + "\n")
  assert plots.main([str(tmp_path)]) == 0
  assert (tmp_path / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
  out = plots.robustness_vs_delta({"ARC": {1: {"cf": 70.0, "ex": 75.0, "exact": 74.0,
                                                "exact_upper": 76.0},
                                            2: {"cf": 60.0, "exact": 65.0, "exact_upper": 70.0}}},
                                  ("cf", "ex", "exact"), tmp_path / "delta.png", "δ",
                                  sizes={1: 10.0, 2: 1e4})
  assert out.read_bytes()[:4] == b"\x89PNG"
  assert plots.main([str(tmp_path / "missing")]) == 2


def test_stop_after_sends_sigterm_and_starts_nothing_after_it(tmp_path):
  """A command still running at the deadline gets SIGTERM (training saves a checkpoint on it),
  then the driver reports the run as stopped; after the deadline nothing starts."""
  saved = tmp_path / "saved"
  child = [sys.executable, "-c", "import signal, sys, time, pathlib\n"
           f"signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path({str(saved)!r}).touch(), "
           "sys.exit(3)))\ntime.sleep(60)"]
  soon = reproduce.Limits(deadline=time.monotonic() + 2)
  started = time.monotonic()
  with pytest.raises(reproduce.DeadlineReached):
    reproduce.runs._run_command(child, tmp_path / "log", soon)
  assert saved.exists() and time.monotonic() - started < 30
  with pytest.raises(reproduce.DeadlineReached):  # not started: it would have slept 60 s
    reproduce.runs._run_command(child, tmp_path / "log", reproduce.Limits(deadline=time.monotonic()))
  assert reproduce.runs._run_command([sys.executable, "-c", "pass"], tmp_path / "log") == 0


def test_dp_shapes_apply_to_new_runs_and_resumed_runs_keep_theirs_and_their_name(tmp_path, monkeypatch):
  run = reproduce.Run("arc_lstm_x", "arc.py:lstm,del2sub2")
  flag = lambda args: [a for a in args if a.startswith("--config.max_dp_shapes")]
  assert flag(reproduce.runs._training_args(run, tmp_path / "new", reproduce.Limits())) == []
  assert flag(reproduce.runs._training_args(run, tmp_path / "new", reproduce.Limits(dp_shapes=4))) == [
      "--config.max_dp_shapes=4"]
  started = tmp_path / "started"
  started.mkdir()
  (started / "config.json").write_text(json.dumps({"max_dp_shapes": 16, "name": "arc_lstm_x"}))
  resumed = reproduce.runs._training_args(run, started, reproduce.Limits(dp_shapes=4))
  assert flag(resumed) == ["--config.max_dp_shapes=16"]
  # Its name comes back too, so that the shapes flag does not extend it to another run's name.
  assert "--config.name=arc_lstm_x" in resumed
  (started / "config.json").write_text(json.dumps({"name": "written before the field"}))
  assert flag(reproduce.runs._training_args(run, started, reproduce.Limits(dp_shapes=4))) == [
      "--config.max_dp_shapes=0"]

  def deadline(*_):
    raise reproduce.DeadlineReached
  monkeypatch.setattr(reproduce.runs, "_run_command", deadline)
  assert reproduce.process_run(run, [], tmp_path, tmp_path / "log", True) == [
      "stopped arc_lstm_x at the --stop-after time; run again to resume"]


def test_an_unfinished_run_is_stashed_listed_and_unpacked_to_resume(tmp_path, monkeypatch):
  """``--stash`` packs an interrupted run directory into results/unfinished/; on a machine
  without the run, ``--list`` says it resumes from there and the driver unpacks it before
  training (here a stand-in command that checks the unpacked checkpoint)."""
  monkeypatch.setattr(reproduce.runs, "ROOT", tmp_path)
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path / "results")
  monkeypatch.setattr(reproduce.runs, "UNFINISHED", tmp_path / "results" / "unfinished")
  run = reproduce.Run("arc_lstm_x", "arc.py:lstm,del2sub2", gpu=True)
  cell = reproduce.Cell("Table 2", "LSTM ARC", "[(Del,2),(Sub,2)]",
                        (reproduce.Evaluation(run, "[(Del,2),(Sub,2)]", ("acc",)),), {})
  first = tmp_path / "machine_a"
  (first / "arc_lstm_x" / "checkpoints" / "700").mkdir(parents=True)
  (first / "arc_lstm_x" / "config.json").write_text('{"num_epochs": 4}')
  (first / "arc_lstm_x" / "metrics.jsonl").write_text(
      '{"kind": "epoch", "epoch": 0, "step": 250}\n{"kind": "train", "epoch": 2, "step": 700}\n')
  (first / "arc_lstm_x" / "checkpoints" / "700" / "state").write_text("saved")
  # 700 of 4 × 250 steps done: 30% of the run's 10 minutes are left.
  assert "resume arc_lstm_x (GPU, ~3 min)" in reproduce.list_cells([cell], first)
  assert reproduce.stash_unfinished([cell], first) == [
      f"stashed {first / 'arc_lstm_x'} in results/unfinished/arc_lstm_x.tar.gz (0.0 MB)"]
  second = tmp_path / "machine_b"
  assert "resume arc_lstm_x from results/unfinished/arc_lstm_x.tar.gz (GPU, ~3 min)" in (
      reproduce.list_cells([cell], second))
  calls = []

  def command(args, log, limits=None):
    calls.append(args[1])
    if args[1] == "experiments/train.py":
      assert (second / "arc_lstm_x" / "checkpoints" / "700" / "state").read_text() == "saved"
      (second / "arc_lstm_x" / "summary.json").write_text("{}")
    return 0
  monkeypatch.setattr(reproduce.runs, "_run_command", command)
  done = reproduce.process_run(run, [], second, tmp_path / "log", True)
  assert done[:3] == ["unpacked results/unfinished/arc_lstm_x.tar.gz", "trained arc_lstm_x",
                      "exported arc_lstm_x"]
  assert calls == ["experiments/train.py", "experiments/export.py"]
  assert not (tmp_path / "results" / "unfinished" / "arc_lstm_x.tar.gz").exists()


def test_the_model_card_is_written_again_after_new_evaluations(tmp_path, monkeypatch):
  """A kept run evaluated anew gets its model card rewritten (experiments/export.py --upgrade),
  so its metrics table lists the new results files; with nothing evaluated nothing is run."""
  monkeypatch.setattr(reproduce.runs, "ROOT", tmp_path)
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path / "results")
  monkeypatch.setattr(reproduce.runs, "kept", lambda run: True)
  run = reproduce.Run("arc_lstm_x", "arc.py:lstm,del2sub2")
  evaluation = reproduce.Evaluation(run, "[(Sub,3)]", ("acc", "cf"))
  calls = []
  monkeypatch.setattr(reproduce.runs, "_run_command", lambda args, log, limits=None: calls.append(
      args[1:]) or 0)
  monkeypatch.setattr(reproduce.runs, "find_result", lambda evaluation: None)
  done = reproduce.process_run(run, [evaluation], tmp_path, tmp_path / "log", False)
  assert calls[-1] == ["experiments/export.py", "--upgrade", "results/arc_lstm_x"]
  assert done[-1] == "model card of arc_lstm_x written"
  calls.clear()
  monkeypatch.setattr(reproduce.runs, "find_result", lambda evaluation: "found")
  assert reproduce.process_run(run, [evaluation], tmp_path, tmp_path / "log", False) == []
  assert calls == []


def test_arc_a3t_figures_have_every_method_at_every_delta_done():
  """The ARC-A3T figures' lines: every method's row, δ = 2 from the table's column in either
  order of the spec ([(Sub,2),(Ins,2)] too), δ = 1 and 3 from the figures' cells; each line is
  labelled with its method (issue 45: the Ins figures skipped δ = 2, one line had no label)."""
  tables = load_script("readme_tables")
  plots = load_script("plots")
  cells = reproduce.cells()
  for first in ("Del", "Ins"):
    series = tables.arc_a3t_series(cells, first)
    done = {c.row for c in cells if c.table in ("ARC-A3T table", "ARC-A3T figures")
            and first in c.column and tables.measured(c)}
    assert set(series) == done and "LSTM arc" in series
    assert sorted(series["LSTM arc"]) == [1, 2, 3], first
    assert all({"cf", "ex"} <= set(values) for values in series["LSTM arc"].values())
  assert plots.line_label("LSTM arc", "ex", 1, 1) == "LSTM arc"  # the only line is named
  assert plots.line_label("LSTM arc", "ex", 3, 1) == "LSTM arc"
  assert plots.line_label("ARC LSTM", "cf", 1, 5) == "CF Acc"  # the δ figure: one model
  assert plots.line_label("ARC LSTM", "cf", 2, 2) == "ARC LSTM CF Acc"
