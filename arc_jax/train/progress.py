"""The whole-run progress bar and its ETA, which leaves compilation out.

The first steps of every length bucket compile (tens of seconds each on CPU), so a rate over all
steps so far (tqdm's) overestimates the remaining time by hours early on. :class:`RunClock`
counts only steps that did not compile (the first step of every kind and batch shape), keeps
one rate per kind of step (ARC's certified steps are several times slower than the clean ones
of its first epoch, λ = 0) and adds the end-of-epoch evaluations at the duration of the last one.
"""

from __future__ import annotations

import datetime

import jax
import numpy as np
from tqdm.auto import tqdm


class RunClock:
  """Seconds per step without compilation, per kind of step, and the remaining time of a run.

  Args:
    steps_per_epoch: steps per epoch (one dev evaluation after each).
    epoch_kinds: the kind of step of every epoch of the run (e.g. ``"clean"``, ``"arc"``).
  """

  def __init__(self, steps_per_epoch: int, epoch_kinds: list[str]):
    self.steps_per_epoch, self.epoch_kinds = steps_per_epoch, epoch_kinds
    self.seconds: dict[str, float] = {}
    self.steps: dict[str, int] = {}
    self.eval_seconds = 0.0
    self._shapes: set[tuple] = set()

  def step_done(self, kind: str, seconds: float, batch) -> None:
    """Counts a step of ``kind`` that took ``seconds`` on ``batch`` (a pytree of arrays), unless
    it is the first of its kind and batch shapes: a jitted step compiles (or loads a compiled
    variant from disk) exactly then."""
    shapes = (kind, *((np.shape(a), str(getattr(a, "dtype", type(a).__name__)))
                      for a in jax.tree.leaves(batch)))
    if shapes in self._shapes:
      self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
      self.steps[kind] = self.steps.get(kind, 0) + 1
    self._shapes.add(shapes)

  def eval_done(self, seconds: float) -> None:
    self.eval_seconds = seconds

  def remaining(self, step: int) -> tuple[float, bool]:
    """(seconds left after ``step``, whether every kind of step left has been timed; if not,
    the seconds count the timed ones only: a lower bound)."""
    seconds, known = 0.0, True
    for epoch in range(step // self.steps_per_epoch, len(self.epoch_kinds)):
      kind = self.epoch_kinds[epoch]
      left = min(self.steps_per_epoch, (epoch + 1) * self.steps_per_epoch - step)
      if self.steps.get(kind):
        seconds += left * self.seconds[kind] / self.steps[kind]
      else:
        known = False
      seconds += self.eval_seconds
    return seconds, known

  def eta(self, step: int) -> str:
    """``"0:17:15"``, ``">0:17:15"`` (a lower bound) or ``"?"`` (nothing timed yet)."""
    seconds, known = self.remaining(step)
    if not self.steps:
      return "?"
    return ("" if known else ">") + str(datetime.timedelta(seconds=round(seconds)))


def run_bar(total: int, initial: int, enabled: bool) -> tqdm:
  """One bar over every step of the run; its postfix carries the epoch, ETA and loss."""
  return tqdm(total=total, initial=initial, unit="step", disable=not enabled, dynamic_ncols=True,
              desc="train", bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
              "[{elapsed}{postfix}]")


def eval_bar(total: int, desc: str, enabled: bool) -> tqdm:
  """A transient bar over the batches of an evaluation."""
  return tqdm(total=total, desc=desc, unit="batch", disable=not enabled, leave=False,
              dynamic_ncols=True)
