"""Reproduces the paper's evaluation: ``python experiments/reproduce.py [--only PATTERN] [--list]
[--device-parallel N] [--gpu-runs] [--dp-shapes N] [--stop-after SECONDS] [--report-only]``.

Every number the paper reports is a *cell* here (:func:`cells`): a table, a row, a column, the
training run that makes its model, and the evaluations that measure it. ``--list`` shows each
cell's state: ``done`` (every results file exists), ``running`` (a process trains or evaluates
its run now) or ``missing`` (what is left, with an estimated time).

Without ``--list`` the driver works through the selected cells: it trains each missing run in
``--runs-dir`` (resuming an interrupted one), exports it into ``results/<run>/`` (the kept model,
arc_jax.train.export), evaluates the export (so the committed numbers are the kept model's), and
finally regenerates ``results/README.md``'s tables and the figures in ``results/figures/`` from
the JSON alone (``--report-only`` does just that). ARC runs and everything on IMDB are marked for
a GPU: they are trained only with ``--gpu-runs`` (or when JAX's backend is a GPU).
``--device-parallel N`` trains N runs at once (one accelerator holds several LSTM runs).

``--stash`` packs the selected runs left unfinished into ``results/unfinished/`` to be committed:
a session whose machine is not kept ends, and the next machine resumes them from there.

On a machine lent for a limited time, ``--stop-after SECONDS`` sends every training and
evaluation the driver started SIGTERM at that time (training saves a checkpoint, see
arc_jax.train.interrupt) and starts nothing after it: bring the runs folder back and run the
driver again anywhere to resume. ``--dp-shapes N`` trains new runs on at most N DP shapes
(``config.max_dp_shapes``; on a GPU each shape compiles for tens of seconds); a resumed run keeps
the value it started with, since the shapes decide which sentences share a batch.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paper  # noqa: E402
from arc_jax.cli.report import METRICS, space_key  # noqa: E402
from arc_jax.configs import PAPER_SPACES  # noqa: E402  (experiments/configs/paper_rows.py)
from arc_jax.train.config import BEFORE_FIELD  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
FIGURES = RESULTS / "figures"
UNFINISHED = RESULTS / "unfinished"
"""``<run>.tar.gz``: interrupted run directories committed with the repository (``--stash``), so
that another machine resumes them; unpacked into ``--runs-dir`` when the run is trained next and
deleted once it is exported."""
CONFIGS = ROOT / "experiments" / "configs"
PYTHON = sys.executable
SPACES = {key: spec for key, spec in PAPER_SPACES.items() if key != "review"}
REVIEW = PAPER_SPACES["review"]
GENERATED_BEGIN = "<!-- reproduce.py: generated tables begin -->"
GENERATED_END = "<!-- reproduce.py: generated tables end -->"


# --------------------------------------------------------------------------- cells

@dataclasses.dataclass(frozen=True)
class Run:
  """One training run: ``experiments/train.py --config CONFIG OVERRIDES``.

  ``minutes``: estimated training time on the machine it is meant for (the 2-core CPU, or one
  GPU when ``gpu``), from the runs measured so far (experiments/README.md, results/README.md).
  """
  name: str
  config: str
  overrides: tuple[str, ...] = ()
  gpu: bool = False
  minutes: float = 10


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """One ``experiments/evaluate.py`` call on a run's export; done when a results file of the
  run holds these metrics for this split, space, lexicon and example count."""
  run: Run
  space: str
  metrics: tuple[str, ...]
  max_candidates: int | None = None  # None: the run's lexicon
  first: int | None = None  # the first N test examples
  minutes: float = 3

  def args(self) -> list[str]:
    args = ["--space", self.space, "--metrics", ",".join(self.metrics), "--no-progress"]
    if self.max_candidates is not None:
      args += ["--max-candidates", str(self.max_candidates)]
    if self.first is not None:
      args += ["--first", str(self.first)]
    return args


@dataclasses.dataclass(frozen=True)
class Cell:
  """A number the paper reports: ``table``/``row``/``column``, measured by ``evaluations``;
  ``paper`` maps metric names to the paper's values (percent)."""
  table: str
  row: str
  column: str
  evaluations: tuple[Evaluation, ...]
  paper: dict[str, float | None]
  ex_by_verifier: bool = False
  """EX is the complete verifier's exact robust accuracy (``exact``) where it left no example
  unknown: the same number by definition, without enumerating S(x)."""

  @property
  def id(self) -> str:
    """``table/row/column`` in lower case, a space by its key: ``table_2/lstm_normal/del2sub2``."""
    column = space_key(self.column) if self.column.startswith("[") else self.column
    return "/".join(re.sub(r"\W+", "_", p).strip("_").lower() for p in (self.table, self.row,
                                                                        column))


ARCHS = {"lstm": "LSTM", "bilstm": "Bi-LSTM", "tree": "Tree-LSTM"}
METHODS = {"normal": "Normal", "augment": "Data Aug.", "hotflip": "HotFlip", "arc": "ARC"}
# Estimated minutes, measured on the 2-core CPU shared with other jobs: an evaluation under
# [(Del,2),(Sub,2)] takes 1-3 (EX enumerates 300k strings of a Normal model); under
# [(Sub,2),(Ins,2)] EX enumerated 5.2M strings of the Normal LSTM in 38 min. Training runs:
# Normal LSTM 2-4 (CPU), data augmentation LSTM 6, Bi-LSTM 8, HotFlip LSTM about 12 (8 epochs of
# 85 s), ARC LSTM 104 on the CPU, tree data augmentation 20 (CPU), ARC tree 4 on a GPU (30 epochs
# of 5-7 s); on one H200 running three ARC rows at once with --dp-shapes 4: ARC LSTM [(Sub,3)] 7,
# ARC Bi-LSTM [(Del,2),(Ins,2)] about 12, ARC LSTM S_review about 20 (epochs of 44-58 s).
# Guesses, not measured yet: IMDB on a GPU, HotFlip Bi-LSTM.
TRAIN_MINUTES = {("lstm", "normal"): 4, ("bilstm", "normal"): 6, ("lstm", "augment"): 8,
                 ("bilstm", "augment"): 12, ("lstm", "hotflip"): 15, ("bilstm", "hotflip"): 25,
                 ("lstm", "arc"): 20, ("bilstm", "arc"): 30, ("tree", "normal"): 40,
                 ("tree", "augment"): 25, ("tree", "hotflip"): 60, ("tree", "arc"): 10}


def table2_run(arch: str, method: str, space: str) -> Run:
  minutes = TRAIN_MINUTES[arch, method]
  if arch == "tree":
    arg = "normal" if method == "normal" else f"{method},{space}"
    name = "normal_tree" if method == "normal" else f"{method}_tree_{space}"
    return Run(name, f"tree.py:{arg}", gpu=method == "arc", minutes=minutes)
  if method == "normal":
    return Run(f"normal_{arch}", f"normal.py:{arch}", minutes=minutes)
  return Run(f"{method}_{arch}_{space}", f"{method}.py:{arch},{space}", gpu=method == "arc",
             minutes=minutes)


def lstm_evaluations(run: Run, space: str, *, max_candidates=None, minutes=3, ex=True,
                     hf=True) -> tuple[Evaluation, ...]:
  metrics = ("acc", "cf") + (("ex",) if ex else ()) + (("hf",) if hf else ())
  return (Evaluation(run, space, metrics, max_candidates=max_candidates, minutes=minutes),)


# EX of a Tree-LSTM on an Ins space, beside other jobs, before leaf states were computed once per
# distinct word (1.5x EX): Normal 93 / 74 min ([(Sub,2),(Ins,2)] / [(Del,2),(Ins,2)]), Data Aug.
# 87 / 53, HotFlip about 140 / 117 (its robust trees, whose spaces are enumerated to the end, are
# the most; ARC certifies part of its robust ones, so it is guessed between); [(Del,2),(Sub,2)]
# 4-12 min.
TREE_EX_INS_MINUTES = {"normal": 60, "augment": 50, "hotflip": 90, "arc": 70}


def tree_evaluations(run: Run, method: str, space: str) -> tuple[Evaluation, ...]:
  minutes = TREE_EX_INS_MINUTES[method] if "Ins" in space else 8
  return (Evaluation(run, space, ("acc", "cf", "ex"), minutes=minutes),
          Evaluation(run, space, ("hf",), minutes=10))


def _paper4(values) -> dict[str, float | None]:
  return dict(zip(("acc", "hf", "cf", "ex"), values)) if values else {}


def cells() -> list[Cell]:
  """Every cell of the paper's evaluation, cheapest training first within each table."""
  out = []
  for arch in ("lstm", "bilstm", "tree"):  # Table 2
    for method in ("normal", "augment", "hotflip", "arc"):
      for space_arg, space in SPACES.items():
        run = table2_run(arch, method, space_arg)
        evaluations = (tree_evaluations(run, method, space) if arch == "tree" else
                       lstm_evaluations(run, space, minutes=40 if "Ins" in space else 3))
        out.append(Cell("Table 2", f"{ARCHS[arch]} {METHODS[method]}", space, evaluations,
                        _paper4(paper.TABLES_2_3.get((arch, method, space_key(space))))))
  for method in ("normal", "augment", "hotflip", "arc"):  # Table 3, S_review
    run = (table2_run("lstm", "normal", "") if method == "normal" else
           Run(f"{method}_lstm_review", f"{method}.py:lstm,review", gpu=method == "arc",
               minutes=3 * TRAIN_MINUTES["lstm", method]))
    paper_row = _paper4(paper.TABLES_2_3[("lstm", method, space_key(REVIEW))])
    out.append(Cell("Table 3", f"LSTM {METHODS[method]}", "S_review",
                    lstm_evaluations(run, REVIEW, max_candidates=0, minutes=10), paper_row))
    if method != "arc":  # the original evaluated its baselines with one candidate per word
      out.append(Cell("Table 3", f"LSTM {METHODS[method]}, 1 candidate per word (the paper's "
                      "protocol)",
                      "S_review", lstm_evaluations(run, REVIEW, max_candidates=1, minutes=5),
                      paper_row))
  # Table 4: A3T beside the ARC LSTM. The paper trained A3T on a CNN; arc_jax has no CNN, so A3T
  # trains the same LSTM as ARC (its certified part runs ARC's DP: a GPU run like ARC's).
  for space_arg in ("del2sub2", "sub2ins2"):
    space = SPACES[space_arg]
    a3t = Run(f"a3t_lstm_{space_arg}", f"a3t.py:{space_arg}", gpu=True, minutes=20)
    out.append(Cell("Table 4", "A3T (HotFlip) LSTM (paper: CNN)", space, lstm_evaluations(a3t, space),
                    _paper4(paper.TABLE_4_A3T[space_key(space)])))
    arc = table2_run("lstm", "arc", space_arg)
    out.append(Cell("Table 4", "ARC LSTM", space, lstm_evaluations(arc, space),
                    _paper4(paper.TABLES_2_3[("lstm", "arc", space_key(space))])))
  for sub in ("sub1", "sub2"):  # Table 5: IMDB
    run = Run(f"arc_imdb_bilstm_{sub}", f"imdb.py:{sub}", gpu=True, minutes=90)
    space = f"[(Sub,{sub[-1]})]"
    out.append(Cell("Table 5", "IMDB Bi-LSTM ARC", space,
                    lstm_evaluations(run, space, minutes=60, hf=False),
                    dict(zip(("acc", "cf", "ex"), paper.TABLE_5_IMDB[space_key(space)]))))
  arc_ins = table2_run("lstm", "arc", "sub2ins2")  # the δ figure
  for delta in range(1, 6):
    space = f"[(Ins,{delta}),(Sub,{delta})]"
    # EX by enumeration for δ ≤ 2; at δ = 3 (7.8M strings for the longest sentence, about four
    # hours here) the complete verifier's exact robustness, which is EX when nothing is unknown
    evaluations = lstm_evaluations(arc_ins, space, ex=delta <= 2,
                                   minutes={1: 5, 2: 40, 3: 15, 4: 15, 5: 20}[delta])
    evaluations += (Evaluation(arc_ins, space, ("exact",), minutes=4 * delta),)
    cf = paper.DELTA_FIGURE_TEXT["cf_at_delta_5"] if delta == 5 else None
    out.append(Cell("δ figure", "ARC LSTM [(Ins,2),(Sub,2)]", f"δ={delta}", evaluations,
                    {"cf": cf} if cf else {}, ex_by_verifier=delta == 3))
  sub3 = Run("arc_lstm_sub3", "arc.py:lstm,del2sub2",  # [(Sub,3)]: λ_max 0.8 (paper appendix)
             ("--config.space=[(Sub,3)]", "--config.lambda_max=0.8", "--config.name=arc_lstm_sub3"),
             gpu=True, minutes=20)
  out.append(Cell("[(Sub,3)]", "ARC LSTM (vs Huang et al.)", "test",
                  lstm_evaluations(sub3, "[(Sub,3)]", minutes=10), _paper4(paper.SUB3_HUANG)))
  for method, run in (("arc", sub3), ("normal", table2_run("lstm", "normal", ""))):
    out.append(Cell("[(Sub,3)]", f"LSTM {METHODS[method]} (vs POPQORN)", "first 100",
                    (Evaluation(run, "[(Sub,3)]", ("acc", "cf"), first=100, minutes=1),),
                    {"cf": paper.SUB3_FIRST_100_CF[method]}))
  for space_arg, first in (("del2sub2", "Del"), ("sub2ins2", "Ins")):  # ARC-A3T
    space = SPACES[space_arg]
    models = {"arc": table2_run("lstm", "arc", space_arg)}
    for part, abstracted in (("first", first), ("second", "Sub")):
      models[f"abs_{part}"] = Run(f"arc_a3t_lstm_{space_arg}_abs_{abstracted.lower()}",
                                  f"arc_a3t.py:{space_arg},{part}", gpu=True, minutes=20)
    for label, run in models.items():
      values = paper.ARC_A3T[(label, space_key(space))]
      out.append(Cell("ARC-A3T table", f"LSTM {label}", space,
                      lstm_evaluations(run, space, hf=False),
                      dict(zip(("acc", "cf", "ex"), values))))
      for delta in (1, 3):  # the ARC-A3T figures: δ = 1..3 (δ = 2 is the table's column)
        family = f"[({first},{delta}),(Sub,{delta})]"
        evaluations = (Evaluation(run, family, ("acc", "cf", "ex"), minutes=3),)
        if delta == 3:  # EX from the complete verifier, as in the δ figure
          evaluations = (Evaluation(run, family, ("acc", "cf"), minutes=3),
                         Evaluation(run, family, ("exact",), minutes=12))
        out.append(Cell("ARC-A3T figures", f"LSTM {label}", family, evaluations, {},
                        ex_by_verifier=delta == 3))
  return out


# --------------------------------------------------------------------------- state

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
    with tarfile.open(_stash(run), "w:gz") as tar:
      tar.add(run_dir, arcname=run.name)
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


# --------------------------------------------------------------------------- running

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


# --------------------------------------------------------------------------- report

def _fmt(value: float | None) -> str:
  return "–" if value is None else f"{value:.1f}"


def measured(cell: Cell) -> dict[str, float]:
  """Metric → percent, over the cell's results files; ``size``: the largest |S(x)| of the split
  (every evaluation records it); ``exact_upper``: the exact verifier's proofs plus its unknowns,
  the most ``exact`` can be; ``ex`` of a cell ``ex_by_verifier`` is ``exact`` when it has no
  unknowns."""
  out, unknowns = {}, None
  for evaluation in cell.evaluations:
    results = find_result(evaluation)
    if results is None:
      continue
    if "space_size" in results:
      out["size"] = results["space_size"]["max"]
    for metric in evaluation.metrics:
      value = results["metrics"][metric]
      out[metric] = 100 * value["value"]
      if metric == "exact":
        out["exact_upper"] = 100 * (value["proofs"] + value["unknowns"]) / value["total"]
        unknowns = value["unknowns"]
  if cell.ex_by_verifier and unknowns == 0:
    out.setdefault("ex", out["exact"])
  return out


def _model_size(run: Run) -> str:
  """`` (464 KB)`` for a kept model, else ``""``."""
  folder = RESULTS / run.name / "model"
  if not kept(run):
    return ""
  return f" ({sum(f.stat().st_size for f in folder.iterdir()) / 1024:.0f} KB)"


def _short(state: State) -> str:
  """The state for the README: what blocks it, or how long the rest takes."""
  if state.state == "missing":
    legacy = ", no model kept" if "no model" in state.detail else ""
    return f"missing (~{state.minutes:g} min{legacy})"
  return state.state


def tables(selected: list[Cell], runs_dir: Path) -> str:
  """Markdown: one table per paper table, ours beside the paper's, gaps over 3 points named."""
  active = _active_workdirs(runs_dir)
  parts = []
  for table in dict.fromkeys(c.table for c in selected):
    in_table = [c for c in selected if c.table == table]
    exact = any("exact" in e.metrics for c in in_table for e in c.evaluations)
    lines = [f"### {table}", "", "| row | space | run | Acc | HF | CF | EX | "
             + ("exact (≤ with unknowns) | " if exact else "")
             + "paper Acc / HF / CF / EX | gaps > 3 | state |",
             "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if exact else "")]
    for cell in in_table:
      ours = measured(cell)
      state = cell_state(cell, runs_dir, active)
      gaps = [f"{m.upper()} {ours[m] - cell.paper[m]:+.1f}" for m in METRICS
              if cell.paper.get(m) is not None and m in ours
              and abs(ours[m] - cell.paper[m]) > 3]
      paper_values = " / ".join(_fmt(cell.paper.get(m)) for m in METRICS) if cell.paper else "–"
      run = cell.evaluations[0].run
      lines.append(f"| {cell.row} | `{cell.column}` | {run.name}{_model_size(run)} | "
                   + " | ".join(_fmt(ours.get(m)) for m in METRICS)
                   + (f" | {_fmt(ours.get('exact'))} (≤ {_fmt(ours.get('exact_upper'))})"
                      if exact else "")
                   + f" | {paper_values} | {', '.join(gaps)} | {_short(state)} |")
    parts.append("\n".join(lines))
  return "\n\n".join(parts) + "\n"


def figures(all_cells: list[Cell]) -> list[Path]:
  """The δ figure, the ARC-A3T δ figures and every kept run's learning curves, from the JSON."""
  import plots  # noqa: PLC0415  (matplotlib only for the figures)

  for stale in [*FIGURES.glob("*.png"), *FIGURES.glob("curves/*.png")]:
    stale.unlink()  # every figure is redrawn from the JSON; none may outlive its data
  written = []
  delta_points, sizes = {}, {}
  for cell in (c for c in all_cells if c.table == "δ figure"):
    values = measured(cell)
    delta = int(cell.column.split("=")[1])
    if "size" in values:
      sizes[delta] = values.pop("size")
    if values:
      delta_points[delta] = values
  if delta_points:
    written.append(plots.robustness_vs_delta(
        {"ARC LSTM": delta_points}, ("acc", "hf", "exact", "ex", "cf"), FIGURES / "delta.png",
        "ARC LSTM trained on [(Ins,2),(Sub,2)], tested on [(Ins,δ),(Sub,δ)]", sizes or None))
  for first in ("Del", "Ins"):
    series: dict[str, dict[int, dict[str, float]]] = {}
    for cell in all_cells:
      if cell.table not in ("ARC-A3T table", "ARC-A3T figures"):
        continue
      match = re.fullmatch(rf"\[\({first},(\d)\),\(Sub,\1\)\]", cell.column.replace(" ", ""))
      values = measured(cell)
      if match and values:
        series.setdefault(cell.row, {})[int(match.group(1))] = values
    for metric in ("ex", "cf"):  # a line needs two δs
      if any(sum(metric in v for v in points.values()) > 1 for points in series.values()):
        written.append(plots.robustness_vs_delta(
            series, (metric,), FIGURES / f"arc_a3t_{first.lower()}_{metric}.png",
            f"ARC-A3T: {metric.upper()} Acc on [({first},δ),(Sub,δ)]"))
  for folder in sorted(p for p in RESULTS.iterdir() if (p / "metrics.jsonl").exists()):
    written.append(plots.learning_curves(folder / "metrics.jsonl",
                                         FIGURES / "curves" / f"{folder.name}.png"))
  return written


def figure_list(paths: list[Path]) -> str:
  """Markdown: the δ figures shown, the learning curves linked."""
  shown = [p for p in paths if p.parent == FIGURES]
  curves = [p for p in paths if p.parent != FIGURES]
  lines = ["### Figures", ""]
  lines += [f"![{p.stem}]({p.relative_to(RESULTS)})" for p in shown] or [
      "No δ figure yet: its evaluations are missing (see the δ figure and ARC-A3T rows above)."]
  if curves:
    lines += ["", "Learning curves (loss, dev Acc and CF, λ and ε): " + ", ".join(
        f"[{p.stem}]({p.relative_to(RESULTS)})" for p in curves) + "."]
  return "\n".join(lines) + "\n"


def write_readme(selected: list[Cell], runs_dir: Path, figure_paths: list[Path] = ()) -> None:
  """Replaces the generated part of results/README.md (between the markers) with the tables
  and the list of figures."""
  readme = RESULTS / "README.md"
  text = readme.read_text() if readme.exists() else "# Results\n"
  block = (f"{GENERATED_BEGIN}\n{tables(selected, runs_dir)}\n"
           f"{figure_list(list(figure_paths))}{GENERATED_END}")
  if GENERATED_BEGIN in text and GENERATED_END in text:
    head, rest = text.split(GENERATED_BEGIN, 1)
    text = head + block + rest.split(GENERATED_END, 1)[1]
  else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
  readme.write_text(text)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--only", help="cells whose id (see --list) contains this glob, or "
                      "whose run name matches it: 'table_2/lstm_*', 'del2ins2', 'normal_*'")
  parser.add_argument("--list", action="store_true", help="show every cell's state and exit")
  parser.add_argument("--device-parallel", type=int, default=1,
                      help="training runs at once (several fit on one GPU; default 1)")
  parser.add_argument("--gpu-runs", action="store_true",
                      help="also train the runs marked for a GPU (ARC, IMDB) on this machine")
  parser.add_argument("--dp-shapes", type=int, help="train new runs on at most this many DP "
                      "shapes (config.max_dp_shapes; 4 on a GPU, where each compiles for tens "
                      "of seconds)")
  parser.add_argument("--stop-after", type=float, metavar="SECONDS",
                      help="send the runs SIGTERM after this many seconds (they save a "
                      "checkpoint) and start nothing new: for a machine lent for a while")
  parser.add_argument("--stash", action="store_true",
                      help="pack the selected runs left unfinished in --runs-dir into "
                      "results/unfinished/ (to commit: another machine resumes them) and exit")
  parser.add_argument("--report-only", action="store_true",
                      help="only regenerate results/README.md's tables and the figures")
  parser.add_argument("--no-report", action="store_true",
                      help="do not regenerate the tables and figures at the end")
  parser.add_argument("--runs-dir", type=Path, default=Path(os.environ.get(
      "ARC_RUNS_DIR", ROOT / "runs")), help="where training runs live (default runs/, "
      "$ARC_RUNS_DIR)")
  args = parser.parse_args(argv)
  if args.device_parallel < 1:
    parser.error(f"--device-parallel {args.device_parallel}: pass at least 1.")
  if args.dp_shapes is not None and args.dp_shapes < 0:
    parser.error(f"--dp-shapes {args.dp_shapes}: pass 0 (exact grids) or more.")
  deadline = None if args.stop_after is None else time.monotonic() + args.stop_after
  all_cells = cells()
  selected = select(all_cells, args.only)
  if not selected:
    parser.error(f"--only {args.only!r} matches no cell; see --list for the cell ids.")
  if args.list:
    print(list_cells(selected, args.runs_dir))
    return 0
  if args.stash:
    print("\n".join(stash_unfinished(selected, args.runs_dir)) or "no unfinished run to stash")
    return 0
  if not args.report_only:  # a GPU machine trains the GPU runs (not asking JAX: it would
    run_cells(selected, args.runs_dir,  # take the GPU's memory)
              args.gpu_runs or shutil.which("nvidia-smi") is not None,
              Limits(args.device_parallel, deadline, args.dp_shapes))
  if args.no_report:
    return 0
  written = figures(all_cells)
  write_readme(all_cells, args.runs_dir, written)
  print(f"wrote results/README.md and {len(written)} figures in results/figures/")
  return 0


if __name__ == "__main__":
  sys.exit(main())
