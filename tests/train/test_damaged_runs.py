"""Run directories that are damaged or cannot be written, as a user meets them
(experiments/train.py and evaluate.py in subprocesses, on the tiny fake data root): a damaged
latest checkpoint gives way to the one before, with one log line; any other damage, a --workdir
that is a file and a read-only run directory stop with one line and status 2, writing nothing;
an evaluation that cannot write its results prints them first; a kill loses no TensorBoard point
up to the last checkpoint."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli_runs import EVALUATE, REPO, TINY, TRAIN, lines, run, tensorboard_scalars
from tests.helpers.fake_data_root import cache_dir, data_root  # noqa: F401  (fixtures)

# Two epochs of 5 steps, a checkpoint every 2 steps (and at the end of each epoch).
SHORT = [a for a in TINY if not a.startswith("--config.num_epochs")] + [
    "--config.num_epochs=2", "--config.checkpoint_every=2"]


def run_unprivileged(args, env, cwd):
  """:func:`run` as a user whom file permissions bind: root writes to read-only folders, so as
  root the command runs in a user namespace of its own (``unshare -U``: as nobody)."""
  if os.geteuid() != 0:
    return run(args, env, cwd)
  return subprocess.run(["unshare", "-U", sys.executable, *args], capture_output=True, text=True,
                        env=env, cwd=cwd, timeout=300, check=False)


@pytest.fixture(scope="module")
def env(data_root, cache_dir):  # noqa: F811
  return dict(os.environ, ARC_DATA_DIR=str(data_root), ARC_CACHE_DIR=str(cache_dir),
              PYTHONPATH=str(REPO))


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, env) -> Path:
  """A run stopped at step 7: latest checkpoints at steps 6 and 7, the best at step 5."""
  folder = tmp_path_factory.mktemp("stopped")
  done = run([TRAIN, *SHORT, "--config.max_steps=7", "--workdir=run"], env, folder)
  assert done.returncode == 0, done.stderr[-3000:]
  return folder / "run"


@pytest.fixture
def workdir(tmp_path, stopped_run) -> Path:
  """A copy of the stopped run to damage, as ``run`` in ``tmp_path`` (the commands' folder)."""
  return shutil.copytree(stopped_run, tmp_path / "run")


def damage(how: str, *checkpoints: Path) -> None:
  """Damages checkpoint folders as a full disk or a bad copy does."""
  for checkpoint in checkpoints:
    meta = checkpoint / "meta" / "metadata"
    if how == "cut short":  # the arrays' data files
      for data in checkpoint.glob("*/d/*"):
        data.write_bytes(data.read_bytes()[:50])
    elif how == "empty meta":
      meta.write_text("")
    elif how == "garbled meta":
      meta.write_text(meta.read_text()[:30])


def latest(workdir: Path) -> list[Path]:
  return [workdir / "checkpoints" / "6", workdir / "checkpoints" / "7"]


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
  """(size, modification time) of everything under ``folder``: folders change when an entry is
  added or removed."""
  return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
          for p in folder.rglob("*")}


def test_a_damaged_latest_checkpoint_gives_way_to_the_one_before(workdir, env):
  damage("cut short", workdir / "checkpoints" / "7")
  logged = (r"The latest checkpoint of run \(step 7\) is damaged \(ValueError: .*\); using the one "
            "of step 6")

  evaluated = run([EVALUATE, "--workdir=run", "--checkpoint=latest", "--metrics=acc",
                   "--no-progress"], env, workdir.parent)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert re.search(logged + r"\.\n", evaluated.stderr), evaluated.stderr[-3000:]
  assert json.loads(evaluated.stdout)["checkpoint"] == {"which": "latest", "step": 6}
  assert (workdir / "checkpoints" / "7").is_dir()  # evaluation only reads

  resumed = run([TRAIN, *SHORT, "--config.max_steps=8", "--workdir=run"], env, workdir.parent)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert re.search(logged + r", and deleting the damaged one\.\n", resumed.stderr)
  assert "Resuming the unfinished run in run from step 6 " in resumed.stderr
  assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["6", "8"]
  steps = [json.loads(l)["step"] for l in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert steps == [1, 2, 3, 4, 5, 5, 6, 7, 8]  # step 5 twice: the train line and the epoch's


def file_workdir(workdir: Path) -> None:
  shutil.rmtree(workdir)
  workdir.write_text("notes")


DAMAGE = {  # case: (what it does to the run, the command, the start of its error line)
    "every latest checkpoint cut short": (
        lambda w: damage("cut short", *latest(w)), [TRAIN, *SHORT],
        r"the latest checkpoint of run \(step 7\) is damaged \(ValueError: .*\) and no earlier "
        r"one is readable: delete run/checkpoints or train again with --overwrite\.$"),
    "empty meta files": (
        lambda w: damage("empty meta", *latest(w)), [EVALUATE, "--checkpoint=latest"],
        r"the latest checkpoint of run \(step 7\) is damaged \(JSONDecodeError: Expecting value: "
        r".*\) and no earlier one is readable"),
    "garbled meta files": (
        lambda w: damage("garbled meta", *latest(w)), [TRAIN, *SHORT],
        r"the latest checkpoint of run \(step 7\) is damaged \(JSONDecodeError: .*\) and no "
        r"earlier one is readable"),
    "damaged best checkpoint": (
        lambda w: damage("cut short", w / "best" / "5"), [EVALUATE],
        r"the best checkpoint of run \(step 5\) is damaged \(ValueError: .*\): train again with "
        r"--overwrite\.$"),
    "damaged config.json": (
        lambda w: (w / "config.json").write_text('{"method": "arc'), [TRAIN, *SHORT],
        r"run/config\.json is damaged \(JSONDecodeError: .*\): restore it, or train again with "
        r"--overwrite\.$"),
    "a file as --workdir (train)": (
        file_workdir, [TRAIN, *SHORT],
        r"run is a file, not a run directory; choose another --workdir\.$"),
    "a file as --workdir (evaluate)": (
        file_workdir, [EVALUATE], r"run is a file: it is not a run directory"),
    "read-only run directory": (
        lambda w: subprocess.run(["chmod", "-R", "a-w", str(w)], check=True), [TRAIN, *SHORT],
        r"cannot write to run \(read-only\): make it writable \(chmod -R u\+w run\) or choose "
        r"another --workdir\.$"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_run_directory_errors_are_one_line_with_status_2_and_write_nothing(workdir, env, case):
  change, command, message = DAMAGE[case]
  folder = workdir.parent
  change(workdir)
  before = snapshot(folder)
  try:
    runner = run_unprivileged if case == "read-only run directory" else run
    done = runner([*command, "--workdir=run"], env, folder)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert re.match("error: " + message, lines(done.stderr)[-1]), lines(done.stderr)[-1]
    assert snapshot(folder) == before
  finally:
    subprocess.run(["chmod", "-R", "u+w", str(folder)], check=True)


def test_an_evaluation_that_cannot_write_its_results_prints_them_first(workdir, env):
  workdir.chmod(0o555)
  try:
    done = run_unprivileged([EVALUATE, "--workdir=run", "--metrics=ex", "--no-progress"], env,
               workdir.parent)
  finally:
    workdir.chmod(0o755)
  assert done.returncode == 2, done.stderr[-3000:]
  assert json.loads(done.stdout)["metrics"]["ex"]["total"] == 2
  assert lines(done.stderr)[-1] == (
      "error: could not write the results printed above to run/eval/test_Del2Sub2_cf_ex.json "
      "(Permission denied): make its folder writable, or pass --output FILE in one that is.")
  assert not (workdir / "eval").exists()


def test_a_kill_loses_no_tensorboard_point_up_to_the_last_checkpoint(tmp_path, env):
  with (tmp_path / "stderr.txt").open("w") as stderr:
    process = subprocess.Popen([sys.executable, TRAIN, *TINY, "--config.checkpoint_every=3",
                                "--workdir=run"], cwd=tmp_path, env=env, stderr=stderr,
                               stdout=subprocess.DEVNULL)
  checkpoints = tmp_path / "run" / "checkpoints"
  saved = lambda: [int(p.name) for p in checkpoints.glob("*") if p.name.isdigit()]
  deadline = time.monotonic() + 300
  # The end of the first epoch (5 steps): its events are a few kB, less than the file buffer.
  while max(saved(), default=0) < 5:
    assert process.poll() is None and time.monotonic() < deadline, (
        (tmp_path / "stderr.txt").read_text()[-3000:])
    time.sleep(0.02)
  process.kill()
  process.wait(timeout=60)
  last = max(saved())
  logged = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
  events = tensorboard_scalars(tmp_path / "run" / "tensorboard")
  for tag, kind in (("train/loss", "train"), ("epoch/dev_acc", "epoch")):
    expected = [r["step"] for r in logged if r["kind"] == kind and r["step"] <= last]
    assert expected and [s for s, _ in events.get(tag, []) if s <= last] == expected, tag
