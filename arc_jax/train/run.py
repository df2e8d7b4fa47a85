"""``train_and_evaluate(config, workdir)``: the training loop of every method, resumable.

Per epoch: train on the shuffled, size-bucketed batches with the method's objective and batch
transform (a method on ARC's curriculum trains with the clean objective while λ = 0), evaluate
dev accuracy and certified accuracy, keep the best epoch (by the method's selection metric; ties
go to the later epoch, as in the original), stop early if configured. At the end the best
parameters are evaluated on the test split (accuracy and certified accuracy under
``config.space``) and the summary is written. Epochs are numbered from 0, like the original's checkpoints.

The loop is the same for every model family: the experiment's family
(:mod:`arc_jax.train.families`) supplies the batches and their placement on the mesh, the
objectives (:mod:`arc_jax.train.objectives`) are written once over its functions; for Tree-LSTMs
an example is a tree and its metrics are the root's.

SIGINT and SIGTERM stop the run cleanly (:mod:`arc_jax.train.interrupt`): a checkpoint at the
current step, then ``{"status": "interrupted", ...}``. A stop during the dev evaluation saves
the epoch's end with the evaluation still to do; the resumed run does it first.

``export_run(run_dir, dest)`` keeps a finished run as plain files (:mod:`arc_jax.train.export`).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from tqdm.contrib.logging import logging_redirect_tqdm

from arc_jax import parallel
from arc_jax.data import num_batches
from arc_jax.data.paths import resolve
from arc_jax.train.checkpoints import Checkpoints, RunDirectory, RunExistsError
from arc_jax.train.config import validate
from arc_jax.train.experiment import Experiment, build_experiment
from arc_jax.train.export import (ExportError, portable_config, save_model, training_command,
                                  write_model_card)
from arc_jax.train.interrupt import Interrupted, StopRequest, stop_on_signals
from arc_jax.train.methods import METHODS
from arc_jax.train.objectives import certify_rows, clean_objective
from arc_jax.train.progress import RunClock, eval_bar, run_bar
from arc_jax.train.schedules import epoch_ramp
from arc_jax.train.steps import (config_optimizer, evaluate_split, init_state, make_eval_step,
                                 make_train_step, zero_totals)

logger = logging.getLogger(__name__)

MAPS_PER_PROGRAM = 1300
"""Memory maps one compiled ARC program holds on CPU (XLA maps a few per kernel): 830–1,600
measured for the LSTM training step on SST-2 under S_review."""


def warn_if_maps_run_short(maps: str = "/proc/self/maps",
                           limit: str = "/proc/sys/vm/max_map_count") -> bool:
  """Logs a warning, and returns True, when this process holds more than half of the memory
  maps Linux allows it: it dies (a segmentation fault in XLA's compiler) when they run out, as
  a run with too many compiled shapes does. Silent where the files do not exist."""
  try:
    with open(maps, encoding="utf-8") as lines:
      used = sum(1 for _ in lines)
    allowed = int(Path(limit).read_text(encoding="utf-8"))
  except (OSError, ValueError):
    return False
  if used <= allowed // 2:
    return False
  logger.warning("This process holds %d of the %d memory maps Linux allows it "
                 "(vm.max_map_count), about %d per compiled program; it dies when they run out. "
                 "Lower config.max_dp_shapes, or raise the limit (as root: sysctl -w "
                 "vm.max_map_count=262144).", used, allowed, MAPS_PER_PROGRAM)
  return True


COPIED_FILES = ("metrics.jsonl", "summary.json")
"""The files of a run directory an export (:func:`export_run`) copies beside ``model/``, with
its ``config.json`` made portable (:func:`~arc_jax.train.export.portable_config`)."""


def train_and_evaluate(config: ml_collections.ConfigDict, workdir, *, overwrite: bool = False,
                       mesh: Mesh | None = None) -> dict[str, Any]:
  """Trains ``config`` in ``workdir``; resumes an unfinished run found there.

  Args:
    config: a training config (:func:`arc_jax.train.default_config`).
    workdir: the run directory (see :mod:`arc_jax.train.checkpoints`).
    overwrite: replace a finished run (otherwise it raises ``RunExistsError``).
    mesh: the data mesh; default all devices.

  Returns:
    The summary (also written to ``summary.json``), or ``{"status": "stopped", "step": …,
    "workdir": …}`` when ``config.max_steps`` stopped the run (run again without it to
    continue), or ``{"status": "interrupted", …, "signal": "SIGINT"}`` when a signal did (run
    again to resume).

  Nothing is written before the config, the work directory and the data pass their checks.
  The data folder (:func:`arc_jax.data.paths.resolve`) is resolved and logged;
  ``config.json`` records ``config.data_dir`` as given (None: found again wherever the run is
  loaded) and how the folder was found (``config.data_source``, a symbolic name), never this
  machine's path for a folder the user did not name.
  """
  validate(config)
  config = ml_collections.ConfigDict(config.to_dict())
  folder = resolve(config.data_dir)
  config.data_source = folder.source
  run = RunDirectory(workdir)
  resumed = run.check(config, overwrite)
  logger.info("Run directory %s (%s).", run.path.absolute(), "resuming" if resumed else "new run")
  experiment = build_experiment(config, mesh)
  run.claim(config, resumed, overwrite)
  checkpoints = Checkpoints(run.path)
  try:
    with stop_on_signals() as stop:
      return _Trainer(experiment, run, checkpoints, stop).train(resumed)
  finally:
    checkpoints.close()
    run.close()


def _rates(totals: dict[str, float]) -> dict[str, float]:
  """Mean loss, train accuracy and (for certified steps) train certified accuracy."""
  n = max(totals["examples"], 1.0)
  out = {"loss": totals["loss"] / n, "train_acc": totals["correct"] / n}
  if totals["certify_examples"]:
    out["train_cf_acc"] = totals["certified"] / totals["certify_examples"]
  return {k: round(float(v), 6) for k, v in out.items()}


def _floats(totals) -> dict[str, float]:
  return {k: float(v) for k, v in totals.items()}


class _Trainer:
  """The loop's fixed parts: steps, schedules and files of one experiment."""

  def __init__(self, experiment: Experiment, run: RunDirectory, checkpoints: Checkpoints,
               stop: StopRequest):
    self.exp, self.run, self.checkpoints, self.stop = experiment, run, checkpoints, stop
    c = self.config = experiment.config
    method = self.method = METHODS[c.method]
    self.steps_per_epoch = num_batches(len(experiment.splits["train"]), c.batch_size)
    spe = self.steps_per_epoch
    # Methods without a curriculum keep λ = ε = 0.
    on = 1.0 if method.curriculum else 0.0
    self.robust_weight = epoch_ramp(on * c.lambda_start, on * c.lambda_max, c.ramp_epochs, spe)
    self.eps = epoch_ramp(on * c.eps_start, on * c.eps_max, c.ramp_epochs, spe)
    self.tx = config_optimizer(c)
    g, mesh = experiment.graphdef, experiment.mesh
    self.train_step = make_train_step(
        g, self.tx, method.objective(experiment, self.robust_weight, self.eps), mesh)
    self.warmup_step = make_train_step(g, self.tx, clean_objective(experiment.family), mesh)
    rows_fn = certify_rows(experiment.family, experiment.space.signature)
    self.eval_step = make_eval_step(g, rows_fn, mesh)
    self.transform = method.batch_transform(experiment) if method.batch_transform else None
    self.replicated = parallel.replicated(mesh)
    self.place = experiment.put
    self.selection = method.selection
    self.show_progress = c.progress and jax.process_index() == 0
    self.clock = RunClock(spe, ["arc" if self._certifies(e) else "clean"
                                for e in range(c.num_epochs)])
    self.bar = None

  # -- state ------------------------------------------------------------------------------

  def _initial(self, resumed: bool):
    """(state, totals, progress) from the latest checkpoint, or fresh."""
    state = parallel.put(init_state(self.exp.params, self.tx, self.config.seed), self.replicated)
    totals = parallel.put(zero_totals(), self.replicated)
    progress = {"step": 0, "epoch_seconds": 0.0, "train_seconds": 0.0, "best": None,
                "seed": self.config.seed, "data": self.exp.data_fingerprint()}
    restored = self.checkpoints.restore_latest(state, totals) if resumed else None
    if restored is None:
      if resumed:
        logger.info("Restarting the unfinished run in %s from step 0 (it saved no checkpoint).",
                    self.run.path)
      self.run.truncate_log(0)
      return state, totals, progress
    state, totals, saved = restored
    if saved["data"] != progress["data"]:
      raise RunExistsError(f"The vocabulary or embeddings built now differ from those of the run "
                           f"in {self.run.path} ({saved['data']} there, {progress['data']} now): "
                           "the data files changed. Restore them, or train in another --workdir.")
    step = saved["step"]
    logger.info("Resuming the unfinished run in %s from step %d (epoch %d, batch %d of %d).",
                self.run.path, step, step // self.steps_per_epoch,
                step % self.steps_per_epoch, self.steps_per_epoch)
    self.run.truncate_log(step)
    return state, totals, saved

  def _save(self, state, totals, meta: dict[str, Any]) -> None:
    """The latest checkpoint, after the TensorBoard events up to it: whatever kills the process
    then, the events of every step the next run does not replay are on disk."""
    self.run.close()
    self.checkpoints.save_latest(state, totals, meta)

  def _evaluate(self, params, split: str) -> dict[str, Any]:
    """Accuracy and certified accuracy (under ``config.space``) of ``params`` on ``split``.

    Raises:
      Interrupted: a stop signal arrived (single process only: several processes must agree,
        see :meth:`_stop_requested`, so they finish the evaluation).
    """
    n, size = len(self.exp.splits[split]), self.config.eval_batch_size
    batches = self.exp.batches(split, size, certify=True)
    stop = self.stop.raise_if_set if jax.process_count() == 1 else None
    flags = evaluate_split(self.eval_step, params, self.exp.rest, batches, n, self.place,
                           bar=eval_bar(num_batches(n, size), "dev" if split == "validation"
                                        else split, self.show_progress),
                           stop=stop, workers=parallel.concurrent_calls(self.exp.mesh))
    correct, certified = flags["correct"], flags["certified"]
    return {"examples": n, "correct": int(correct.sum()), "certified": int(certified.sum()),
            "acc": round(float(correct.mean()), 6), "cf_acc": round(float(certified.mean()), 6)}

  def _stopped(self, step: int) -> dict[str, Any]:
    if self.stop:
      return {"status": "interrupted", "step": step, "workdir": str(self.run.path),
              "signal": self.stop.name}
    logger.info("Stopped at step %d (config.max_steps); run again without max_steps to resume.",
                step)
    return {"status": "stopped", "step": step, "workdir": str(self.run.path)}

  def _stop_requested(self, step: int) -> bool:
    """Whether to stop after ``step`` for a signal. Several processes must stop at the same
    step, so they agree at each log step (``config.log_every``) instead of every step."""
    if jax.process_count() == 1:
      return bool(self.stop)
    if step % self.config.log_every:
      return False
    return bool(multihost_utils.process_allgather(np.int32(bool(self.stop))).any())

  def _certifies(self, epoch: int) -> bool:
    """Whether ``epoch`` trains a curriculum method's own objective (λ > 0); before that, its
    warm-up trains the clean objective on the batches as they come."""
    return (self.method.curriculum
            and float(self.robust_weight(epoch * self.steps_per_epoch)) > 0)

  def _early_stopped(self, epoch: int, progress) -> bool:
    """Whether early stopping ends the run after ``epoch``."""
    best, patience = progress["best"], self.config.early_stopping
    return bool(patience and best is not None and epoch - best["epoch"] >= patience)

  # -- loop -------------------------------------------------------------------------------

  def train(self, resumed: bool) -> dict[str, Any]:
    c, spe = self.config, self.steps_per_epoch
    state, totals, progress = self._initial(resumed)
    step = progress["step"]
    self.bar = run_bar(c.num_epochs * spe, step, self.show_progress)
    with self.bar, logging_redirect_tqdm():
      if progress.pop("evaluating", False):  # stopped during the dev evaluation of its epoch
        if not self._close_epoch(state, totals, step, progress):
          return self._stopped(step)
        totals = parallel.put(zero_totals(), self.replicated)
      if step and not step % spe and self._early_stopped(step // spe - 1, progress):
        return self._finish("early_stopped", step, progress)  # stopped during the test split
      for epoch in range(step // spe, c.num_epochs):
        if c.max_steps is not None and step >= c.max_steps:
          return self._stopped(step)
        state, totals, step = self._train_epoch(state, totals, step, epoch, progress)
        if step % spe:
          self._save(state, totals, dict(progress, step=step))
          return self._stopped(step)
        if not self._close_epoch(state, totals, step, progress):
          return self._stopped(step)
        totals = parallel.put(zero_totals(), self.replicated)
        if self._early_stopped(epoch, progress):
          logger.info("Early stopping after epoch %d: no dev improvement since epoch %d.",
                      epoch, progress["best"]["epoch"])
          return self._finish("early_stopped", step, progress)
      return self._finish("completed", step, progress)

  def _close_epoch(self, state, totals, step: int, progress) -> bool:
    """Ends the epoch that ends at ``step``: dev evaluation and selection, then the epoch's
    checkpoint. False if a signal stopped the evaluation (then the checkpoint says so)."""
    try:
      self._end_epoch(state, totals, step, step // self.steps_per_epoch - 1, progress)
    except Interrupted:
      self._save(state, totals, dict(progress, step=step, evaluating=True))
      return False
    progress["train_seconds"] += progress["epoch_seconds"]
    progress.update(step=step, epoch_seconds=0.0)
    self._save(state, parallel.put(zero_totals(), self.replicated), progress)
    return True

  def _train_epoch(self, state, totals, step: int, epoch: int, progress):
    """Trains from ``step`` to the end of ``epoch`` (or to max_steps, or a stop signal); returns
    (state, totals, step) and updates ``progress`` (the epoch's seconds and the totals at the
    last log line)."""
    c, spe = self.config, self.steps_per_epoch
    first = epoch * spe
    robust_weight, eps = float(self.robust_weight(first)), float(self.eps(first))
    certify = self._certifies(epoch)
    warmup = self.method.curriculum and not certify
    step_fn = self.warmup_step if warmup else self.train_step
    transform = None if warmup else self.transform
    # A curriculum method's objective certifies; its transform, if any, makes its own plans.
    batches = self.exp.batches("train", c.batch_size, certify=certify and transform is None,
                               shuffle=True, seed=c.seed, epoch=epoch, start=step - first)
    start_time = time.perf_counter()
    resumed = step > first
    previous = progress["epoch_seconds"] if resumed else 0.0
    # Totals at the last log line, so that a resumed interval spans the same steps.
    logged = ({k: np.float32(v) for k, v in progress["logged"].items()} if resumed
              else jax.device_get(totals))
    log_time, log_step = start_time, step
    status = ""
    bar, clock = self.bar, self.clock
    # A step's time runs from the end of the previous one: it includes building the batch (the
    # DP plans) and, dispatch being asynchronous, the device work that the next sync waits for.
    tic = time.perf_counter()
    for batch in batches:
      if transform is not None:
        batch = transform(batch, step, state.params)
      state, totals = step_fn(state, self.exp.rest, self.place(batch), totals)
      step += 1
      if step % c.log_every == 0:
        current, now = jax.device_get(totals), time.perf_counter()
        rates = _rates({k: current[k] - logged[k] for k in current})
        self.run.log({"kind": "train", "epoch": epoch, "step": step, "lambda": robust_weight,
                      "eps": eps, **rates, "seconds": round(now - log_time, 3),
                      "steps_per_s": round((step - log_step) / (now - log_time), 3)})
        status = f", loss {rates['loss']:.4f}, acc {rates['train_acc']:.3f}"
        logged, log_time, log_step = current, now, step
      toc = time.perf_counter()
      clock.step_done("arc" if certify else "clean", toc - tic, batch)
      tic = toc
      bar.update()
      bar.set_postfix_str(f"epoch {epoch}/{c.num_epochs - 1}, ETA {clock.eta(step)}{status}",
                          refresh=False)
      if step == c.max_steps or self._stop_requested(step):
        break
      if step % c.checkpoint_every == 0 and step % spe:
        seconds = previous + time.perf_counter() - start_time
        self._save(state, totals, dict(
            progress, step=step, epoch_seconds=seconds, logged=_floats(logged)))
    jax.block_until_ready(state)
    progress.update(epoch_seconds=previous + time.perf_counter() - start_time,
                    logged=_floats(logged))
    return state, totals, step

  def _end_epoch(self, state, totals, step: int, epoch: int, progress) -> None:
    """Dev evaluation, best-epoch selection and the epoch's metrics line."""
    tic = time.perf_counter()
    dev = self._evaluate(state.params, "validation")
    eval_seconds = time.perf_counter() - tic
    self.clock.eval_done(eval_seconds)
    record = {"epoch": epoch, "step": step, "dev_acc": dev["acc"], "dev_cf_acc": dev["cf_acc"]}
    best = progress["best"]
    if best is None or record[self.selection] >= best[self.selection]:
      progress["best"] = best = record
      self.checkpoints.save_best(state.params, dict(record, data=progress["data"]))
    first = epoch * self.steps_per_epoch
    self.run.log({"kind": "epoch", "epoch": epoch, "step": step,
                  "lambda": float(self.robust_weight(first)), "eps": float(self.eps(first)),
                  **_rates(jax.device_get(totals)), "dev_acc": dev["acc"],
                  "dev_cf_acc": dev["cf_acc"], "best_epoch": best["epoch"],
                  "seconds": round(progress["epoch_seconds"], 3),
                  "eval_seconds": round(eval_seconds, 3)})
    logger.info("Epoch %d: dev acc %.4f, dev certified acc %.4f (best epoch %d).", epoch,
                dev["acc"], dev["cf_acc"], best["epoch"])
    warn_if_maps_run_short()  # an epoch and its dev evaluation compile every shape of the run

  def _finish(self, status: str, step: int, progress) -> dict[str, Any]:
    """Evaluates the best parameters on the test split and writes summary.json."""
    params, best = self.checkpoints.restore_best(self.exp.params)
    tic = time.perf_counter()
    try:
      test = self._evaluate(params, "test")
    except Interrupted:  # training is saved; the resumed run evaluates the test split
      return self._stopped(step)
    summary = {
        "name": self.config.name, "method": self.config.method, "status": status,
        "steps": step, "steps_per_epoch": self.steps_per_epoch,
        "epochs_trained": -(-step // self.steps_per_epoch), "selection": self.selection,
        "best": {k: best[k] for k in ("epoch", "step", "dev_acc", "dev_cf_acc")},
        "test": {"split": "test", "space": self.config.space, **test,
                 "seconds": round(time.perf_counter() - tic, 3)},
        "train_seconds": round(progress["train_seconds"], 3), "devices": self.exp.mesh.size,
    }
    self.run.write_summary(summary)
    logger.info("Finished %s: best epoch %d, test acc %.4f, test certified acc %.4f.",
                self.run.path, best["epoch"], test["acc"], test["cf_acc"])
    return summary


def export_run(run_dir, dest, command: str | None = None) -> dict[str, Any]:
  """Copies a finished run's files and best parameters to ``dest``, keeps its data in
  ``dest/../store/`` and writes its model card (:mod:`arc_jax.train.export`); returns the model
  record. ``command``: the command line that trained it (default
  :func:`~arc_jax.train.export.training_command` from the defaults).

  Evaluation results (``eval/``) are copied only when the export is exact; otherwise evaluate
  the export (``experiments/evaluate.py --workdir DEST``) so that its numbers are the export's.
  """
  run, dest = RunDirectory(run_dir), Path(dest)
  if not run.finished:
    raise ExportError(f"{run.path} has no summary.json: finish the run before exporting it.")
  if dest.resolve() == run.path.resolve():
    raise ExportError(f"The export's destination {dest} is the run directory itself.")
  experiment = build_experiment(run.config())
  checkpoints = Checkpoints(run.path, read_only=True)
  try:
    params, meta = checkpoints.restore_best(experiment.params)
  finally:
    checkpoints.close()
  dest.mkdir(parents=True, exist_ok=True)
  for name in COPIED_FILES:
    shutil.copy2(run.path / name, dest / name)
  saved = json.loads(run.config_file.read_text())
  (dest / "config.json").write_text(
      json.dumps(portable_config(saved), indent=2, sort_keys=True) + "\n")
  record = save_model(dest, params, experiment.params, meta, experiment.data)
  if record["exact"] and (run.path / "eval").is_dir():
    shutil.copytree(run.path / "eval", dest / "eval", dirs_exist_ok=True)
  write_model_card(dest, command or training_command(saved))
  return record
