"""ARC training throughput: jitted training steps per second and an epoch-time estimate, JSON.

Builds the experiment of ``experiments/configs/arc.py:MODEL,ROW`` (LSTM, Bi-LSTM; SST-2) or
``experiments/configs/tree.py:arc,ROW`` (Tree-LSTM; SST trees) with its defaults (batch size,
hidden sizes, optimiser), λ fixed at the row's λ_max and ε at 1 (the costliest phase), and
times the whole training step (forward, backward, Optax update) on the first ``--batches``
batches of epoch 0, best of ``--repeats`` passes after a compiling one. ``epoch_s_estimate`` is
the epoch's batch count times the mean step time, scaled by the epoch's mean DP work over the
measured batches' (a step's time grows about linearly with the padded width times the slots of
the DP grid it runs on). ``losses`` are the ARC losses at the initial parameters without
dropout of the first two batches of the length-pooled order (:func:`arc_jax.data.batch_order`
over the sizes, the order of revisions before reachable-grid batches), so two revisions can be
checked to compute the same losses on the same rows. ``shapes`` counts the distinct (width, DP
grid, word table) shapes of the epoch: one compilation each. ``host_epoch_s`` is the host time
to build the epoch's batches (each row's DP shape, the batch order, every batch's plan): the
training loop pays it beside the steps.

    python benchmarks/train_throughput.py [--model lstm|bilstm|tree] [--row del2sub2]
        [--batches N] [--baseline REV [--rounds R | --pairs P]]

``--baseline REV`` measures REV and this checkout side by side (benchmarks/revisions.py) and
adds a ``train_compare`` line: the ratio of steps/s and the largest loss difference; with
``--pairs P`` both stay compiled and alternate P timed passes each, and the line adds the median
and range of the paired ratios (``revisions.interleaved``).
``cpu_steps_per_s`` divides by the process's CPU time instead of the wall time: on a shared,
overloaded machine it is the steadier measure (``cpu_ratio``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys
import time

import jax
import numpy as np
import optax
from flax import nnx

import arc_jax
from arc_jax import interval, parallel
from arc_jax.data import batch_order
from arc_jax.train import steps
from arc_jax.train.experiment import build_experiment

import revisions

# The configs of the revision being measured (a baseline's worktree, or this checkout): a config
# file of this checkout could import modules the baseline does not have.
CONFIGS = pathlib.Path(arc_jax.__file__).resolve().parents[1] / "experiments" / "configs"


def load_config(model: str, row: str):
  name, arg = ("tree", f"arc,{row}") if model == "tree" else ("arc", f"{model},{row}")
  spec = importlib.util.spec_from_file_location(f"config_{name}", CONFIGS / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def width(batch) -> int:
  """Padded width of a batch: tokens (sequence batches) or nodes (tree batches)."""
  return (batch.trees if hasattr(batch, "trees") else batch).token_ids.shape[1]


def grid(batch) -> tuple[int, ...] | None:
  """The reachable budgets a sequence batch's DP runs on (None: the space's whole grid)."""
  return getattr(getattr(batch, "plan", None), "reachable", None)


def word_table(batch) -> int | None:
  """The size of the word table a sequence batch's DP projects (None: every position's words)."""
  return getattr(getattr(batch, "plan", None), "distinct_words", None)


def work(batch, full_grid: tuple[int, ...]) -> int:
  """Padded width times the slots of the DP grid the batch runs on."""
  budgets = grid(batch)
  return width(batch) * int(np.prod(full_grid if budgets is None else [d + 1 for d in budgets]))


def timed_list(batches) -> tuple[list, float]:
  """The batches of a (lazy) iterator and the seconds it took to produce them."""
  tic = time.perf_counter()
  return list(batches), time.perf_counter() - tic


def prepare(model: str, row: str, num_batches: int):
  """(one_pass, describe): a function that runs the training steps of the first
  ``num_batches`` batches once from the initial state and returns (seconds, CPU seconds), and
  one that makes the result line from the first (compiling) pass's seconds and the timed
  passes' (seconds, CPU seconds)."""
  config = load_config(model, row)
  exp = build_experiment(config)
  lam = float(config.lambda_max)
  schedules = optax.constant_schedule(lam), optax.constant_schedule(1.0)
  order = dict(certify=True, shuffle=True, seed=config.seed, epoch=0)
  if hasattr(exp, "family"):  # model families (arc_jax.train.families) and objectives
    from arc_jax.train.objectives import arc_objective  # pylint: disable=import-outside-toplevel
    objective = arc_objective(exp.family, exp.space.signature, *schedules, config.robust_loss)
    epoch, host_s = timed_list(exp.batches("train", config.batch_size, **order))
    put = exp.put
    examples, labels = exp.examples("train")
    pooled = batch_order([exp.family.lowering.size(x) for x in examples], config.batch_size,
                         seed=config.seed, epoch=0, shuffle=True)
    same_rows = [exp.family.lowering.lower(exp.builder, examples, labels, i, config.batch_size, True)
                 for i in pooled[:2]]
  else:  # a baseline revision before them: a Task class per family
    task = exp.task
    objective = task.arc_objective(exp.space.signature, *schedules, config.robust_loss)
    epoch, host_s = timed_list(task.batches(exp, "train", config.batch_size, **order))
    put = lambda b: task.put(b, exp.mesh)
    same_rows = epoch[:2]  # its order is the length-pooled one
  tx = steps.config_optimizer(config)
  train_step = steps.make_train_step(exp.graphdef, tx, objective, exp.mesh)
  batches = [put(b) for b in epoch[:num_batches]]

  @jax.jit
  def loss_at_init(params, rest, batch):
    return objective(nnx.merge(exp.graphdef, params, rest), batch, None, 0)[0]

  losses = [float(loss_at_init(exp.params, exp.rest, put(b))) for b in same_rows]
  replicated = parallel.replicated(exp.mesh)

  def one_pass():
    state = parallel.put(steps.init_state(exp.params, tx, config.seed), replicated)
    totals = parallel.put(steps.zero_totals(), replicated)
    tic, cpu = time.perf_counter(), time.process_time()
    for b in batches:
      state, totals = train_step(state, exp.rest, b, totals)
    jax.block_until_ready(totals)
    return time.perf_counter() - tic, time.process_time() - cpu

  full_grid = exp.space.signature.grid
  measured_work = np.mean([work(b, full_grid) for b in epoch[:num_batches]])
  epoch_work = np.mean([work(b, full_grid) for b in epoch])

  def describe(compile_s: float, runs: list[tuple[float, float]]) -> dict:
    seconds = sorted(wall for wall, _ in runs)
    cpu_seconds = min(cpu for _, cpu in runs)
    step_s = seconds[0] / len(batches)
    d = jax.devices()[0]
    return {"benchmark": "arc_train_steps", "model": model, "space": config.space,
            "batch_size": config.batch_size, "batches": len(batches),
            "steps_per_s": round(1 / step_s, 3),
            "median_steps_per_s": round(len(batches) / seconds[len(seconds) // 2], 3),
            "cpu_steps_per_s": round(len(batches) / cpu_seconds, 3),
            "epoch_batches": len(epoch),
            "epoch_s_estimate": round(len(epoch) * step_s * epoch_work / measured_work, 1),
            "measured_work_share": round(float(measured_work / epoch_work), 3),
            "host_epoch_s": round(host_s, 1),
            "shapes": len({(width(b), grid(b), word_table(b)) for b in epoch}),
            "first_pass_s": round(compile_s, 1), "losses": losses,
            "device": f"{d.platform}:{d.device_kind} x{jax.device_count()}",
            # Revisions with interval.UNROUNDED train on unrounded bounds (certify with rounding).
            "training_rounds_outward": (hasattr(interval, "round_outward")
                                        and not hasattr(interval, "UNROUNDED")),
            "load": revisions.load()}

  return one_pass, describe


def measure(model: str, row: str, num_batches: int, repeats: int) -> dict:
  one_pass, describe = prepare(model, row, num_batches)
  compile_s, _ = one_pass()
  return describe(compile_s, [one_pass() for _ in range(repeats)])


def serve(model: str, row: str, num_batches: int) -> None:
  """The child of an interleaved run (``revisions.interleaved``): compiles, times one pass per
  line of stdin (``revisions.serve_passes``), then prints the result line over those passes."""
  one_pass, describe = prepare(model, row, num_batches)
  compile_s, _ = one_pass()
  timed = revisions.serve_passes(lambda _: one_pass())
  print(json.dumps(describe(compile_s, [p for passes in timed.values() for p in passes])),
        flush=True)


def compare(lines: list[dict], baseline: str, passes: list[dict] = ()) -> dict:
  best = {(rev, key): max(l[key] for l in lines if l["revision"] == rev)
          for rev in (baseline, "current") for key in ("steps_per_s", "cpu_steps_per_s")}
  first = {rev: next(l for l in lines if l["revision"] == rev) for rev in (baseline, "current")}
  host = {rev: min(l["host_epoch_s"] for l in lines if l["revision"] == rev)
          for rev in (baseline, "current")}
  return {"benchmark": "train_compare", "model": first["current"]["model"],
          "space": first["current"]["space"],
          **{f"{rev}_{key}": value for (rev, key), value in best.items()},
          "ratio": round(best["current", "steps_per_s"] / best[baseline, "steps_per_s"], 2),
          "cpu_ratio": round(best["current", "cpu_steps_per_s"]
                             / best[baseline, "cpu_steps_per_s"], 2),
          "host_epoch_s": [host[baseline], host["current"]],
          "host_ratio": round(host[baseline] / max(host["current"], 0.1), 2),
          "losses": [first[baseline]["losses"], first["current"]["losses"]],
          "largest_loss_difference": float(np.max(np.abs(
              np.subtract(first[baseline]["losses"], first["current"]["losses"])))),
          **revisions.paired_ratios(passes, baseline),
          "load": revisions.load()}


def main(argv=None):
  argv = sys.argv[1:] if argv is None else argv
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model", choices=("lstm", "bilstm", "tree"), default="lstm")
  parser.add_argument("--row", default="del2sub2", help="del2sub2, sub2ins2 or del2ins2")
  parser.add_argument("--batches", type=int, default=6)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--baseline", help="a revision to measure side by side (e.g. 4046642)")
  parser.add_argument("--rounds", type=int, default=1, help="alternating runs per revision")
  parser.add_argument("--pairs", type=int,
                      help="with --baseline: both revisions compiled and kept alive, then this "
                           "many timed passes of each, alternating (revisions.interleaved)")
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.baseline:
    if args.pairs:
      passes, lines = revisions.interleaved(__file__, argv, args.baseline, args.pairs,
                                            [args.row])
    else:
      passes, lines = [], revisions.side_by_side(__file__, argv, args.baseline, args.rounds)
    for line in ([{"benchmark": "train_pass", **p} for p in passes] + lines
                 + [compare(lines, args.baseline, passes)]):
      print(json.dumps(line), flush=True)
    return
  if args.serve:
    return serve(args.model, args.row, args.batches)
  print(json.dumps(measure(args.model, args.row, args.batches, args.repeats)), flush=True)


if __name__ == "__main__":
  sys.exit(main())
