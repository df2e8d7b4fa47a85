"""Run directories (arc_jax.train.checkpoints)."""

import json

import ml_collections
import pytest

from arc_jax.train import RunDirectory, RunExistsError, default_config
from arc_jax.train.config import RUN_CONTROL_FIELDS


def test_run_directory_resumes_unfinished_and_refuses_finished(tmp_path):
  config = default_config()
  run = RunDirectory(tmp_path / "run")
  assert run.start(config) is False
  assert json.loads(run.config_file.read_text())["name"] == config.name
  changed = ml_collections.ConfigDict(config.to_dict())
  for field in RUN_CONTROL_FIELDS:
    changed[field] = 7 if field != "progress" else False
  assert RunDirectory(run.path).start(changed) is True
  changed.lambda_max = 0.9
  with pytest.raises(RunExistsError, match="lambda_max: 0.5 there, 0.9 now"):
    RunDirectory(run.path).start(changed)
  run.log({"step": 3})
  run.log({"step": 9})
  run.truncate_log(5)
  assert run.metrics_file.read_text().splitlines() == ['{"step": 3}']
  run.write_summary({"status": "completed"})
  (run.path / "notes.txt").write_text("mine")
  with pytest.raises(RunExistsError, match="--overwrite"):
    RunDirectory(run.path).start(config)
  assert RunDirectory(run.path).start(config, overwrite=True) is False
  assert sorted(p.name for p in run.path.iterdir()) == ["config.json", "notes.txt"]


def test_runs_written_before_a_field_existed_resume_with_its_default(tmp_path):
  config = default_config()
  older = {k: v for k, v in config.to_dict().items() if k not in ("model", "optimizer")}
  (tmp_path / "config.json").write_text(json.dumps(older))
  run = RunDirectory(tmp_path)
  assert (run.config().model, run.config().optimizer) == ("lstm", "adam")
  assert run.start(config) is True


def test_run_directory_refuses_a_foreign_directory(tmp_path):
  (tmp_path / "data.csv").write_text("x")
  with pytest.raises(RunExistsError, match="another --workdir"):
    RunDirectory(tmp_path).start(default_config())
