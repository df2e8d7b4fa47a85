"""The whole-run progress bar and its ETA, which leaves compilation out.

The first steps of every length bucket compile (tens of seconds each on CPU), so a rate over all
steps so far (tqdm's) overestimates the remaining time by hours early on. :class:`RunClock`
counts only steps that did not compile (a jitted step's cache grew during compiling ones) and
adds the end-of-epoch evaluations at the duration of the last one.
"""

from __future__ import annotations

import datetime

from tqdm.auto import tqdm


class RunClock:
  """Seconds per step without compilation, and the remaining time of a run.

  Args:
    total_steps: steps of the whole run.
    steps_per_epoch: steps per epoch (one dev evaluation after each).
  """

  def __init__(self, total_steps: int, steps_per_epoch: int):
    self.total_steps, self.steps_per_epoch = total_steps, steps_per_epoch
    self.step_seconds = 0.0
    self.steps = 0
    self.eval_seconds: float | None = None

  def step_done(self, seconds: float, compiled: bool) -> None:
    if not compiled:
      self.step_seconds += seconds
      self.steps += 1

  def eval_done(self, seconds: float) -> None:
    self.eval_seconds = seconds

  def remaining(self, step: int) -> float | None:
    """Seconds left after ``step`` (None before a step without compilation)."""
    if not self.steps:
      return None
    left = self.total_steps - step
    evals = -(-left // self.steps_per_epoch)
    return left * self.step_seconds / self.steps + evals * (self.eval_seconds or 0.0)


def format_seconds(seconds: float | None) -> str:
  return "?" if seconds is None else str(datetime.timedelta(seconds=round(seconds)))


def run_bar(total: int, initial: int, enabled: bool) -> tqdm:
  """One bar over every step of the run; its postfix carries the epoch, ETA and loss."""
  return tqdm(total=total, initial=initial, unit="step", disable=not enabled, dynamic_ncols=True,
              desc="train", bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
              "[{elapsed}{postfix}]")


def eval_bar(total: int, desc: str, enabled: bool) -> tqdm:
  """A transient bar over the batches of an evaluation."""
  return tqdm(total=total, desc=desc, unit="batch", disable=not enabled, leave=False,
              dynamic_ncols=True)
