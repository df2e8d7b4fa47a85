"""Progress and the ETA of a run (arc_jax.train.progress)."""

from arc_jax.train.progress import RunClock


def test_run_clock_leaves_compilation_out_and_times_each_kind_of_step():
  clock = RunClock(steps_per_epoch=10, epoch_kinds=["clean", "arc", "arc"])
  assert clock.eta(0) == "?"
  clock.step_done("clean", 60.0, compiled=True)  # a compiling step is not a rate
  assert clock.eta(1) == "?"
  for _ in range(9):
    clock.step_done("clean", 1.0, compiled=False)
  clock.eval_done(5.0)
  # ARC steps not timed yet: a lower bound, counting the evaluations after epochs 1 and 2.
  assert clock.remaining(10) == (10.0, False) and clock.eta(10) == ">0:00:10"
  clock.step_done("arc", 4.0, compiled=False)
  assert clock.remaining(11) == (9 * 4.0 + 5.0 + 10 * 4.0 + 5.0, True)
  assert clock.eta(11) == "0:01:26"
