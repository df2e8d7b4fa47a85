"""Progress and the ETA of a run (arc_jax.train.progress)."""

import numpy as np

from arc_jax.train.progress import RunClock

BATCH = {"tokens": np.zeros((4, 8), np.int32)}
WIDER = {"tokens": np.zeros((4, 16), np.int32)}


def test_run_clock_leaves_compilation_out_and_times_each_kind_of_step():
  clock = RunClock(steps_per_epoch=10, epoch_kinds=["clean", "arc", "arc"])
  assert clock.eta(0) == "?"
  clock.step_done("clean", 60.0, BATCH)  # the first step of a batch shape compiles: no rate
  assert clock.eta(1) == "?"
  clock.step_done("clean", 50.0, WIDER)  # nor the first of a new shape
  for _ in range(8):
    clock.step_done("clean", 1.0, BATCH)
  clock.eval_done(5.0)
  # ARC steps not timed yet: a lower bound, counting the evaluations after epochs 1 and 2.
  assert clock.remaining(10) == (10.0, False) and clock.eta(10) == ">0:00:10"
  clock.step_done("arc", 40.0, BATCH)  # a new kind of step on a known shape compiles too
  clock.step_done("arc", 4.0, BATCH)
  assert clock.remaining(11) == (9 * 4.0 + 5.0 + 10 * 4.0 + 5.0, True)
  assert clock.eta(11) == "0:01:26"
