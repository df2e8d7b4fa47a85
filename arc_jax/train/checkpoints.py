"""The run directory: resolved config, metrics log, summary, and Orbax checkpoints.

Layout of ``workdir``::

  config.json     the resolved config (written once, when the run starts)
  metrics.jsonl   one JSON object per log interval ("kind": "train") and per epoch ("epoch")
  tensorboard/    the same numbers as TensorBoard event files (tag "<kind>/<field>"), one file
                  per stretch between checkpoints (each is complete when its checkpoint is saved)
  summary.json    written when training ends; its presence marks a finished run
  checkpoints/    the two latest checkpoints (Orbax): train state, metric totals of the running
                  epoch and a JSON "meta" item (step, epoch, selection state, data fingerprint);
                  a damaged latest one is skipped for the one before
  best/           the parameters of the selected (best dev) epoch, with their meta
  eval/           results of experiments/evaluate.py

A checkpoint's step identifies the data position: epoch ``step // steps_per_epoch``, batch
``step % steps_per_epoch`` of that epoch's order (a function of the seed and epoch).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import jax
import ml_collections
import tensorboardX
from jax.experimental import multihost_utils

from arc_jax.train.config import RUN_CONTROL_FIELDS, with_defaults
from arc_jax.train.export import has_exported_model

logger = logging.getLogger(__name__)

RUN_FILES = ("config.json", "metrics.jsonl", "summary.json", "checkpoints", "best", "eval",
             "tensorboard")

_NOT_SCALARS = ("kind", "epoch", "step", "best_epoch")
"""metrics.jsonl fields that are not written to TensorBoard (they index the others)."""


class RunExistsError(RuntimeError):
  """The work directory holds a finished run, or another run's files."""


class RunNotFoundError(FileNotFoundError):
  """The work directory is not a run directory, or holds no checkpoint of the kind asked for."""


class RunDamagedError(RuntimeError):
  """A file of the run directory cannot be read: its config.json, or every checkpoint of a kind."""


class RunNotWritableError(PermissionError):
  """The run directory, or one of its files, cannot be written."""


def read_only_part(path) -> Path | None:
  """What stops ``path`` from being written: it, or the nearest folder above it that exists,
  when this process may not write there; None when nothing does."""
  path = Path(path)
  existing = next(p for p in (path, *path.parents) if p.exists())
  return None if os.access(existing, os.W_OK) else existing


def _damage(error: Exception) -> str:
  """How a restore failed, shortened (TensorStore's messages run to kilobytes)."""
  return textwrap.shorten(f"{type(error).__name__}: {error}", 160, placeholder=" …")


@functools.cache
def _quiet_failed_restores() -> None:
  """Called before a restore. When one fails (a damaged checkpoint), Orbax closes its event loop
  with reads still running, and their ends are reported as dozens of tracebacks on stderr, some
  after the restore returned: TensorStore's callbacks on the closed loop ("Event loop is closed",
  unraisable), the reads that failed too ("Task exception was never retrieved") and those never
  started ("coroutine ... was never awaited"). From then on, those reports are dropped: the
  restore's own error says what is damaged."""
  report = sys.unraisablehook

  def hook(unraisable):
    if not (isinstance(unraisable.exc_value, RuntimeError)
            and str(unraisable.exc_value) == "Event loop is closed"):
      report(unraisable)

  sys.unraisablehook = hook
  logging.getLogger("asyncio").addFilter(
      lambda record: not record.getMessage().startswith("Task exception was never retrieved"))
  warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)


class RunDirectory:
  """The files of one training run (see the module docstring)."""

  def __init__(self, path):
    self.path = Path(path)
    self.config_file = self.path / "config.json"
    self.metrics_file = self.path / "metrics.jsonl"
    self.summary_file = self.path / "summary.json"
    self._events = None  # the TensorBoard writer, opened by truncate_log

  @property
  def finished(self) -> bool:
    return self.summary_file.exists()

  def start(self, config: ml_collections.ConfigDict, overwrite: bool = False) -> bool:
    """:meth:`check`, then :meth:`claim`; returns True when an unfinished run is resumed."""
    resumed = self.check(config, overwrite)
    self.claim(config, resumed, overwrite)
    return resumed

  def check(self, config: ml_collections.ConfigDict, overwrite: bool = False) -> bool:
    """Whether ``config`` may run here, writing nothing; True when it resumes an unfinished run.

    A finished run is never replaced silently: it raises :class:`RunExistsError` unless
    ``overwrite`` (then :meth:`claim` deletes this run's files, only those, see ``RUN_FILES``).
    An unfinished run is resumed if its config equals ``config`` up to ``RUN_CONTROL_FIELDS``.
    A directory (or one of its run files) that cannot be written raises
    :class:`RunNotWritableError` now, before any work that it would lose.
    """
    if self.path.exists() and not self.path.is_dir():
      raise RunExistsError(f"{self.path} is a file, not a run directory; choose another --workdir.")
    resumed = self._check(config.to_dict(), overwrite)
    blocked = next(filter(None, map(read_only_part, (self.path, *self.run_files()))), None)
    if blocked is not None:
      raise RunNotWritableError(f"cannot write to {blocked} (read-only): make it writable "
                                f"(chmod -R u+w {blocked}) or choose another --workdir.")
    return resumed

  def claim(self, config: ml_collections.ConfigDict, resumed: bool, overwrite: bool = False
            ) -> None:
    """Writes ``config.json`` of a new run (after :meth:`check`). With several processes every
    one checks, process 0 writes, and all wait for it."""
    if jax.process_index() == 0 and not resumed:
      if overwrite:
        self.remove()
      self.path.mkdir(parents=True, exist_ok=True)
      self.config_file.write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
    if jax.process_count() > 1:
      multihost_utils.sync_global_devices(f"start {self.path}")
    return resumed

  def _check(self, resolved: dict[str, Any], overwrite: bool) -> bool:
    """Raises RunExistsError if ``resolved`` may not run here; True if it resumes."""
    if overwrite:
      return False
    if self.finished:
      raise RunExistsError(f"{self.path} holds a finished run ({self.summary_file.name} "
                           "exists). Pass --overwrite to replace it, or choose another --workdir.")
    if self.config_file.exists():
      saved = self.config().to_dict()
      changed = sorted(k for k in set(saved) | set(resolved)
                       if k not in RUN_CONTROL_FIELDS and saved.get(k) != resolved.get(k))
      if changed:
        details = ", ".join(f"{k}: {saved.get(k)!r} there, {resolved.get(k)!r} now"
                            for k in changed)
        raise RunExistsError(f"{self.path} holds an unfinished run with another config ("
                             f"{details}). Resume it with its own config, pass --overwrite to "
                             "start over, or choose another --workdir.")
      return True
    if self.path.exists() and any(self.path.iterdir()):
      raise RunExistsError(f"{self.path} is not empty and holds no run (no config.json); choose "
                           "another --workdir.")
    return False

  def run_files(self) -> list[Path]:
    """This run's files and folders (``RUN_FILES``) that exist."""
    return [self.path / name for name in RUN_FILES if (self.path / name).exists()]

  def remove(self) -> None:
    """Deletes this run's files (``RUN_FILES``), nothing else in the directory."""
    for target in self.run_files():
      if target.is_dir():
        shutil.rmtree(target)
      else:
        target.unlink()

  def config(self) -> ml_collections.ConfigDict:
    """The run's config; fields added after it was written take their defaults."""
    if not self.config_file.exists():
      where = ("does not exist" if not self.path.exists() else "is a file"
               if not self.path.is_dir() else "holds no config.json")
      raise RunNotFoundError(f"{self.path} {where}: it is not a run directory (train one with "
                             "experiments/train.py --workdir, or pass the --workdir of one).")
    try:
      return with_defaults(json.loads(self.config_file.read_text()))
    except ValueError as error:  # cut short or garbled
      raise RunDamagedError(f"{self.config_file} is damaged ({_damage(error)}): restore it, or "
                            "train again with --overwrite.") from error

  def require_checkpoint(self, which: str) -> None:
    """Raises :class:`RunNotFoundError` unless the run has a ``"best"`` or ``"latest"``
    checkpoint (a step folder of ``best/`` or ``checkpoints/``, or for ``"best"`` a kept model,
    :mod:`arc_jax.train.export`); reads no checkpoint."""
    if which == "best" and has_exported_model(self.path):
      return
    folder = self.path / ("best" if which == "best" else "checkpoints")
    if not (folder.is_dir() and any(p.name.isdigit() for p in folder.iterdir())):
      hint = ("it has not finished an epoch yet" if which == "best"
              else "it has not saved a checkpoint yet")
      raise RunNotFoundError(f"No {which} checkpoint in {folder}: {hint}. Train it (run "
                             "experiments/train.py again to resume), or evaluate another run.")

  def log(self, record: dict[str, Any]) -> None:
    """Appends one JSON line to metrics.jsonl and its numbers to the TensorBoard events
    (process 0 only)."""
    if jax.process_index() == 0:
      with self.metrics_file.open("a") as f:
        f.write(json.dumps(record) + "\n")
      events = self._events or self._open_events(record["step"])
      for key, value in record.items():
        if key not in _NOT_SCALARS and isinstance(value, (int, float)):
          events.add_scalar(f"{record.get('kind', 'metrics')}/{key}", value, record["step"])

  def _open_events(self, step: int, purge: bool = False):
    """A new event file for the events from ``step`` on; ``purge`` drops those of the earlier
    files from ``step`` on. Its name ends with the step, so that files opened in the same second
    (the name's time) keep their order and do not overwrite each other."""
    self.close()
    self._events = tensorboardX.SummaryWriter(str(self.path / "tensorboard"),
                                              purge_step=step if purge else None, flush_secs=30,
                                              filename_suffix=f".{step:010d}")
    return self._events

  def truncate_log(self, step: int) -> None:
    """Drops the lines and events logged after ``step`` (a resumed run replays those steps) and
    opens the TensorBoard writer."""
    if jax.process_index() != 0:
      return
    self._open_events(step + 1, purge=True)
    if not self.metrics_file.exists():
      return
    lines = self.metrics_file.read_text().splitlines(keepends=True)
    self.metrics_file.write_text("".join(l for l in lines if json.loads(l)["step"] <= step))

  def close(self) -> None:
    """Writes out the TensorBoard events and closes their file (the next :meth:`log` opens
    another). Only closing is sure to write them all: tensorboardX queues events for a thread,
    and its flush writes those the thread has taken."""
    if self._events is not None:
      self._events.close()
      self._events = None

  def write_summary(self, summary: dict[str, Any]) -> None:
    if jax.process_index() == 0:
      self.summary_file.write_text(json.dumps(summary, indent=2) + "\n")


def _orbax():
  """``orbax.checkpoint``, imported when a checkpoint is opened: a kept model (it has none)
  loads without it, 0.2 s sooner."""
  import orbax.checkpoint  # pylint: disable=import-outside-toplevel
  return orbax.checkpoint


def _abstract(tree):
  return jax.tree.map(_orbax().utils.to_shape_dtype_struct, tree)


class Checkpoints:
  """The two latest checkpoints (to resume, the older one in case the newer one is damaged) and
  the best one (to evaluate).

  Args:
    path: the run directory.
    read_only: open existing checkpoints without writing (evaluation).
  """

  def __init__(self, path, read_only: bool = False):
    self.path, self.read_only = Path(path), read_only
    ocp = _orbax()

    def manager(name, keep):
      options = ocp.CheckpointManagerOptions(
          preservation_policy=ocp.checkpoint_managers.LatestN(keep), read_only=read_only,
          create=not read_only, cleanup_tmp_directories=not read_only)
      return ocp.CheckpointManager(self.path.absolute() / name, options=options)

    self.latest = manager("checkpoints", 2)
    self.best = manager("best", 1)

  def save_latest(self, state, totals, meta: dict[str, Any]) -> None:
    """Saves (train state, metric totals, meta) at step ``meta["step"]``."""
    ocp = _orbax()
    self.latest.save(meta["step"], args=ocp.args.Composite(
        state=ocp.args.StandardSave({"train": state, "totals": totals}),
        meta=ocp.args.JsonSave(meta)))

  def restore_latest(self, state, totals):
    """(state, totals, meta) of the newest readable latest checkpoint, or None if there is none.

    ``state`` and ``totals`` give the structure, shapes and shardings to restore into. A damaged
    checkpoint (a file cut short, garbled or missing) is skipped for the one before it, with a
    warning, and deleted unless read-only (Orbax would not save again at its step or before).

    Raises:
      RunDamagedError: every checkpoint is damaged.
    """
    ocp = _orbax()
    args = ocp.args.Composite(
        state=ocp.args.StandardRestore(_abstract({"train": state, "totals": totals})),
        meta=ocp.args.JsonRestore())
    _quiet_failed_restores()
    damaged = {}
    for step in sorted(self.latest.all_steps(), reverse=True):
      try:
        restored = self.latest.restore(step, args=args)
      except Exception as error:  # pylint: disable=broad-except  (each reader raises its own)
        damaged[step] = _damage(error)
        continue
      for bad, damage in damaged.items():
        logger.warning("The latest checkpoint of %s (step %d) is damaged (%s); using the one of "
                       "step %d%s.", self.path, bad, damage, step,
                       "" if self.read_only else ", and deleting the damaged one")
        if not self.read_only:
          self.latest.delete(bad)
      return restored.state["train"], restored.state["totals"], restored.meta
    if damaged:
      step = max(damaged)
      raise RunDamagedError(f"the latest checkpoint of {self.path} (step {step}) is damaged "
                            f"({damaged[step]}) and no earlier one is readable: delete "
                            f"{self.path / 'checkpoints'} or train again with --overwrite.")
    return None

  def save_best(self, params, meta: dict[str, Any]) -> None:
    """Saves the best parameters and waits, so that no later "latest" can name a lost best."""
    ocp = _orbax()
    self.best.save(meta["step"], args=ocp.args.Composite(
        params=ocp.args.StandardSave(params), meta=ocp.args.JsonSave(meta)))
    self.best.wait_until_finished()

  def restore_best(self, params):
    """(params, meta) of the best checkpoint, restored into the structure of ``params``.

    Raises:
      RunNotFoundError: there is none.
      RunDamagedError: it is damaged (it is the only one: an older one holds another epoch).
    """
    step = self.best.latest_step()
    if step is None:
      raise RunNotFoundError(f"No best checkpoint in {self.best.directory}: the run has not "
                             "finished an epoch yet (train it with experiments/train.py).")
    _quiet_failed_restores()
    ocp = _orbax()
    try:
      restored = self.best.restore(step, args=ocp.args.Composite(
          params=ocp.args.StandardRestore(_abstract(params)), meta=ocp.args.JsonRestore()))
    except Exception as error:  # pylint: disable=broad-except  (each reader raises its own)
      raise RunDamagedError(f"the best checkpoint of {self.path} (step {step}) is damaged "
                            f"({_damage(error)}): train again with --overwrite.") from error
    return restored.params, restored.meta

  def close(self) -> None:
    """Waits for pending (asynchronous) saves and releases the managers."""
    for manager in (self.latest, self.best):
      manager.wait_until_finished()
      manager.close()
