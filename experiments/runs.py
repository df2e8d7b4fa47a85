"""The reproduction's runs on this machine: the state of each cell from its files (results, run
directories, stashes, processes in /proc), run-time estimates, the ``--stash`` tarballs, and the
commands that train, export and evaluate a run (see experiments/reproduce.py).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from arc_jax.cli.report import space_key
from arc_jax.train.config import BEFORE_FIELD
from paper import Cell, Evaluation, Run

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
UNFINISHED = RESULTS / "unfinished"
"""``<run>.tar.gz``: interrupted run directories committed with the repository (``--stash``), so
that another machine resumes them; unpacked into ``--runs-dir`` when the run is trained next and
deleted once it is exported. A stash holds the run directory with its newest checkpoint only
(:func:`pack_run`); stashes packed before that hold every checkpoint, and unpack the same way."""
PYTHON = sys.executable


def results_files(run_name: str) -> list[Path]:
  """Evaluation results of a kept run: ``results/<run>/eval/*.json`` and, for runs kept before
  exports, the same files at the folder's top level."""
  folder = RESULTS / run_name
  return sorted(folder.glob("eval/*.json")) + sorted(folder.glob("test_*.json"))


def find_result(evaluation: Evaluation) -> dict | None:
  """The results JSON that holds ``evaluation``'s metrics, or None."""
  for path in results_files(evaluation.run.name):
    results = json.loads(path.read_text())
    if not isinstance(results, dict) or "metrics" not in results:
      continue
    if (results.get("split") == "test" and space_key(results["space"]) == space_key(
        evaluation.space) and set(evaluation.metrics) <= set(results["metrics"])
        and (evaluation.max_candidates is None
             or results.get("max_candidates") == evaluation.max_candidates)
        and results.get("examples") == (evaluation.first or results.get("examples"))
        and (evaluation.first is not None or results.get("first") is None)):
      return results
  return None


def _active_workdirs(runs_dir: Path) -> set[str]:
  """Names of the runs (in ``runs_dir`` or ``results/``) that a train.py or evaluate.py process
  on this machine works on now; other processes' work directories elsewhere do not count."""
  ours = {runs_dir.resolve(), RESULTS.resolve()}
  active = set()
  for proc in Path("/proc").glob("[0-9]*"):
    try:
      args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
      if not any(a.endswith(("train.py", "evaluate.py")) for a in args) or "--workdir" not in args:
        continue
      workdir = (Path(os.readlink(proc / "cwd")) / args[args.index("--workdir") + 1]).resolve()
    except (OSError, IndexError):
      continue
    if workdir.parent in ours:
      active.add(workdir.name)
  return active


@dataclasses.dataclass
class State:
  state: str  # done / running / missing
  detail: str
  minutes: float = 0.0


def kept(run: Run) -> bool:
  return (RESULTS / run.name / "model" / "meta.json").exists()


def cell_state(cell: Cell, runs_dir: Path, active: set[str]) -> State:
  """The cell's state. Results of a run whose model is not kept (runs committed before models
  were) do not count as done: the run is trained again so that its model is kept."""
  pending = [e for e in cell.evaluations if not (kept(e.run) and find_result(e) is not None)]
  if not pending:
    return State("done", "")
  run = pending[0].run
  if run.name in active:
    return State("running", f"{run.name} is training or being evaluated")
  minutes = 0.0
  names = []
  for e in pending:
    decided, examples = _ex_progress(e) or (0, 1)
    minutes += round(e.minutes * (1 - decided / examples), 1)
    resumes = f" (EX resumes: {decided:,} of {examples:,} decided)" if decided else ""
    names.append(f"{space_key(e.space)}:{','.join(e.metrics)}{resumes}")
  evaluations = ", ".join(names)
  if kept(run):
    return State("missing", f"evaluate {run.name} on {evaluations}", minutes)
  run_dir = runs_dir / run.name
  if (run_dir / "summary.json").exists():
    return State("missing", f"export {run_dir}, evaluate on {evaluations}", minutes)
  stashed = not (run_dir / "config.json").exists() and _stash(run).exists()
  verb = "resume" if (run_dir / "config.json").exists() or stashed else "train"
  source = f" from {_stash(run).relative_to(ROOT)}" if stashed else ""
  where = "GPU" if run.gpu else "CPU"
  legacy = " (its committed results have no model)" if results_files(run.name) else ""
  training = round(run.minutes * (1 - _trained_share(run, run_dir)), 1)
  return State("missing", f"{verb} {run.name}{source}{legacy} ({where}, ~{training:g} min), "
               f"evaluate on {evaluations}", minutes + training)


def _ex_progress(evaluation: Evaluation) -> tuple[int, int] | None:
  """(examples decided, examples) of the EX progress file an interrupted evaluation of a kept
  run left (``eval/<results name>.progress.jsonl``, which evaluate.py resumes), or None."""
  if "ex" not in evaluation.metrics:
    return None
  space = re.sub(r"[^A-Za-z0-9]+", "", evaluation.space)
  folder = RESULTS / evaluation.run.name / "eval"
  for path in sorted(folder.glob(f"test_{space}.progress.jsonl")) + sorted(
      folder.glob(f"test_{space}_*.progress.jsonl")):
    lines = path.read_text().splitlines()
    try:
      return len(lines) - 1, int(json.loads(lines[0])["examples"])
    except (IndexError, KeyError, TypeError, ValueError):
      continue
  return None


def _trained_share(run: Run, run_dir: Path) -> float:
  """The share of its training steps an unfinished run has logged (in ``run_dir`` or its stash):
  the last logged step over its epochs' steps (``num_epochs`` times the steps of its first
  epoch); 0 for a new run, or where its files do not tell."""
  names = ("config.json", "metrics.jsonl")
  try:
    if (run_dir / "config.json").exists():
      texts = [(run_dir / name).read_text() for name in names]
    elif _stash(run).exists():
      with tarfile.open(_stash(run)) as tar:
        texts = [tar.extractfile(f"{run.name}/{name}").read().decode() for name in names]
    else:
      return 0.0
    config = json.loads(texts[0])
    records = [json.loads(line) for line in texts[1].splitlines() if line.strip()]
  except (OSError, KeyError, AttributeError, ValueError, tarfile.TarError):
    return 0.0
  epochs = [r for r in records if r.get("kind") == "epoch"]
  if not epochs or not config.get("num_epochs"):
    return 0.0
  total = config["num_epochs"] * epochs[0]["step"] / (epochs[0]["epoch"] + 1)
  return min(max(r.get("step", 0) for r in records) / total, 1.0)


def _stash(run: Run) -> Path:
  return UNFINISHED / f"{run.name}.tar.gz"


def newest_checkpoint(run_dir: Path) -> Path | None:
  """The newest complete checkpoint in ``run_dir/checkpoints/``, or None. Orbax writes a step
  into a temporary folder and renames it to the bare step number once it is complete."""
  steps = [p for p in (run_dir / "checkpoints").glob("*") if p.name.isdigit()]
  return max(steps, key=lambda p: int(p.name), default=None)


def pack_run(run_dir: Path, archive: Path) -> None:
  """Writes ``run_dir`` to the tarball ``archive`` (top folder: the run's name) with what
  resuming it reads, and nothing more: every file and folder but ``checkpoints/``, of which only
  the newest complete checkpoint.

  The run keeps two checkpoints so that a damaged newest one (a file cut short by a crash) falls
  back to the one before; a stopped run's newest one is whole, and the older one would double
  the archive (a Tree-LSTM's trained word vectors and their Adagrad sums are ~40 MB a
  checkpoint). Inside a checkpoint nothing is rebuilt from the data: frozen word vectors are
  not parameters, so neither they nor optimiser state for them are saved. ``best/`` (one
  checkpoint) is what the finished run is tested and exported from; ``tensorboard/`` is not
  read to resume, but it is a few kB and keeps the run's curves whole on the next machine.
  """
  with tarfile.open(archive, "w:gz") as tar:
    for path in sorted(run_dir.iterdir()):
      if path.name != "checkpoints":
        tar.add(path, arcname=f"{run_dir.name}/{path.name}")
    checkpoint = newest_checkpoint(run_dir)
    if checkpoint is not None:
      tar.add(checkpoint, arcname=f"{run_dir.name}/checkpoints/{checkpoint.name}")


def stash_unfinished(selected: list[Cell], runs_dir: Path) -> list[str]:
  """Packs each selected run that ``runs_dir`` holds unfinished (a config, no summary) into
  ``results/unfinished/<run>.tar.gz``; a run still training is left alone."""
  active, done = _active_workdirs(runs_dir), []
  runs = {e.run for cell in selected for e in cell.evaluations}
  for run in sorted(runs, key=lambda r: r.name):
    run_dir = runs_dir / run.name
    if not (run_dir / "config.json").exists() or (run_dir / "summary.json").exists():
      continue
    if run.name in active:
      done.append(f"left {run.name}: it is training (stop it first; SIGTERM saves a checkpoint)")
      continue
    UNFINISHED.mkdir(parents=True, exist_ok=True)
    pack_run(run_dir, _stash(run))
    done.append(f"stashed {run_dir} in {_stash(run).relative_to(ROOT)} "
                f"({_stash(run).stat().st_size / 2**20:.1f} MB)")
  return done


def select(all_cells: list[Cell], pattern: str | None) -> list[Cell]:
  if not pattern:
    return all_cells
  pattern = pattern.lower()
  return [c for c in all_cells if fnmatch.fnmatch(c.id, f"*{pattern}*")
          or any(fnmatch.fnmatch(e.run.name, pattern) for e in c.evaluations)]


def list_cells(selected: list[Cell], runs_dir: Path) -> str:
  active = _active_workdirs(runs_dir)
  lines, counts = [], {}
  for cell in selected:
    state = cell_state(cell, runs_dir, active)
    counts[state.state] = counts.get(state.state, 0) + 1
    estimate = f" [~{state.minutes:g} min]" if state.state == "missing" else ""
    lines.append(f"{state.state:8} {cell.id}: {state.detail}{estimate}".rstrip(": "))
  total = sum(counts.values())
  lines.append(f"{total} cells: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in
                                               ("done", "running", "missing")))
  return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class Limits:
  """How the driver runs its commands: ``parallel`` at once (sharing a GPU's memory),
  ``deadline`` (``time.monotonic()``) at which they are sent SIGTERM and nothing new starts,
  ``dp_shapes`` for new training runs (None: the config's)."""
  parallel: int = 1
  deadline: float | None = None
  dp_shapes: int | None = None

  def expired(self) -> bool:
    return self.deadline is not None and time.monotonic() >= self.deadline


STOP_GRACE_SECONDS = 120
"""How long a command sent SIGTERM at the deadline may take to save and exit before SIGKILL."""


class DeadlineReached(Exception):
  """The ``--stop-after`` time came: the command was stopped, or not started."""


def _run_command(args: list[str], log: Path, limits: Limits = Limits()) -> int:
  """Runs ``args`` in the repository root, output appended to ``log``; its exit status.

  Raises:
    DeadlineReached: ``limits.deadline`` passed before or while it ran (it was sent SIGTERM).
  """
  if limits.expired():
    raise DeadlineReached
  log.parent.mkdir(parents=True, exist_ok=True)
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  if limits.parallel > 1:  # JAX preallocates 75% of a GPU per process: share it between runs
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{0.9 / limits.parallel:.2f}")
  with log.open("a") as out:
    out.write(f"$ {' '.join(args)}\n")
    out.flush()
    process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    remaining = None if limits.deadline is None else limits.deadline - time.monotonic()
    try:
      return process.wait(timeout=remaining)
    except subprocess.TimeoutExpired:
      process.send_signal(signal.SIGTERM)  # training saves a checkpoint and exits
      try:
        process.wait(timeout=STOP_GRACE_SECONDS)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
      raise DeadlineReached from None


def _training_args(run: Run, run_dir: Path, limits: Limits) -> list[str]:
  """train.py's command line; ``--dp-shapes`` for a new run, the saved value when resuming.

  A resumed run also gets its saved name back: passing its shapes would otherwise extend the name
  (``_max_dp_shapes16``) and train.py would refuse the directory as another run's.
  """
  shapes, name = limits.dp_shapes, []
  if (run_dir / "config.json").exists():
    saved = json.loads((run_dir / "config.json").read_text())
    shapes = saved.get("max_dp_shapes", BEFORE_FIELD["max_dp_shapes"])
    name = [f"--config.name={saved['name']}"] if "name" in saved else []
  return [PYTHON, "experiments/train.py", "--config", f"experiments/configs/{run.config}",
          *run.overrides, *([f"--config.max_dp_shapes={shapes}"] if shapes is not None else []),
          *name, "--config.progress=False", "--workdir", str(run_dir)]


def process_run(run: Run, evaluations: list[Evaluation], runs_dir: Path, log: Path,
                allow_gpu: bool, limits: Limits = Limits()) -> list[str]:
  """Trains (or resumes), exports and evaluates one run; returns what it did or skipped."""
  done = []
  try:
    if not kept(run):
      run_dir = runs_dir / run.name
      if not (run_dir / "summary.json").exists():
        if run.gpu and not allow_gpu:
          return [f"skipped {run.name}: marked for a GPU (pass --gpu-runs to train it here)"]
        if not run_dir.exists() and _stash(run).exists():
          with tarfile.open(_stash(run)) as tar:
            tar.extractall(runs_dir, filter="data")
          done.append(f"unpacked {_stash(run).relative_to(ROOT)}")
        status = _run_command(_training_args(run, run_dir, limits), log, limits)
        if status:
          return [f"training {run.name} failed (exit {status}; see {log})"]
        done.append(f"trained {run.name}")
      status = _run_command([PYTHON, "experiments/export.py", "--workdir", str(run_dir), "--to",
                             str(RESULTS / run.name), "--replace"], log, limits)
      if status:
        return done + [f"export of {run.name} failed (exit {status}; see {log})"]
      done.append(f"exported {run.name}")
      _stash(run).unlink(missing_ok=True)
    for evaluation in evaluations:
      if find_result(evaluation) is not None:
        continue  # the export's own (exact) results, or an earlier evaluation of the export
      status = _run_command([PYTHON, "experiments/evaluate.py", "--workdir",
                             str(RESULTS.relative_to(ROOT) / run.name), *evaluation.args()], log,
                            limits)
      done.append(f"evaluated {run.name} on {evaluation.space} ({','.join(evaluation.metrics)})"
                  + (f": exit {status}, see {log}" if status else ""))
    if any(line.startswith("evaluated") for line in done):
      # The model card lists the results files: written again once they are all there.
      status = _run_command([PYTHON, "experiments/export.py", "--upgrade",
                             str(RESULTS.relative_to(ROOT) / run.name)], log, limits)
      done.append(f"model card of {run.name} written" + (f": exit {status}, see {log}"
                                                        if status else ""))
  except DeadlineReached:
    done.append(f"stopped {run.name} at the --stop-after time; run again to resume")
  return done


def run_cells(selected: list[Cell], runs_dir: Path, allow_gpu: bool,
              limits: Limits = Limits()) -> None:
  by_run: dict[Run, list[Evaluation]] = {}
  for cell in selected:
    for evaluation in cell.evaluations:
      if not (kept(evaluation.run) and find_result(evaluation) is not None):
        by_run.setdefault(evaluation.run, [])
        if evaluation not in by_run[evaluation.run]:
          by_run[evaluation.run].append(evaluation)
  log = runs_dir / "reproduce.log"
  with concurrent.futures.ThreadPoolExecutor(max_workers=limits.parallel) as pool:
    jobs = [pool.submit(process_run, run, evals, runs_dir, log, allow_gpu, limits)
            for run, evals in by_run.items()]
    for job in concurrent.futures.as_completed(jobs):
      for line in job.result():
        print(line, flush=True)
