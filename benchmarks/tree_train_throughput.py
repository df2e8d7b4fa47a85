"""Tree-LSTM ARC training throughput: gradient steps of the ARC loss on SST train batches, JSON.

Builds the experiment of ``experiments/configs/tree.py:arc,ROW`` (hidden 150, trainable word
vectors, dropout 0.5, batches of 20 trees padded as its family pads them) and times the jitted
``jax.value_and_grad`` of its ARC objective (λ = λ_max, ε = 1: the costliest phase; unrounded
bounds, as training uses; dropout on) on the first ``--batches`` batches of epoch 0, best of
``--repeats`` passes after a compiling one. ``--pad-to N`` pads every batch to N nodes instead
(the family pads every batch to 128 nodes up to bf8de7d), which isolates the DP's speed from the
padding. ``losses`` and ``grad_norms`` are the ARC losses and the gradients' global norms of the
timed steps (initial parameters, the same dropout key), so two revisions that pad alike (same
dropout masks) can be checked to compute the same objective and gradients on the same trees.

    python benchmarks/tree_train_throughput.py [--row del2sub2] [--batches N] [--pad-to N]
        [--baseline REV [--rounds R]]

``--baseline REV`` measures REV and this checkout side by side (benchmarks/revisions.py) and adds
a ``tree_train_compare`` line: the ratios of steps/s (``ratio``, wall; ``cpu_ratio``, per
CPU-second of the process: the steadier measure on a shared machine) and the largest loss and
relative gradient-norm differences.
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
from arc_jax.perturbation.trees import TreeBatchBuilder
from arc_jax.train.experiment import build_experiment
from arc_jax.train.objectives import arc_objective

import revisions

# The configs of the revision being measured (a baseline's worktree, or this checkout).
CONFIGS = pathlib.Path(arc_jax.__file__).resolve().parents[1] / "experiments" / "configs"


def load_config(row: str):
  spec = importlib.util.spec_from_file_location("config_tree", CONFIGS / "tree.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(f"arc,{row}")


def measure(row: str, num_batches: int, repeats: int, pad_to: int | None) -> dict:
  config = load_config(row)
  exp = build_experiment(config)
  objective = arc_objective(exp.family, exp.space.signature,
                            optax.constant_schedule(float(config.lambda_max)),
                            optax.constant_schedule(1.0), config.robust_loss)
  builder = exp.builder if pad_to is None else TreeBatchBuilder(
      exp.data.vocab, exp.space, min_substitutes=exp.builder.min_substitutes,
      node_buckets=(pad_to,))
  examples, labels = exp.examples("train")
  order = [i for i in exp.batches("train", config.batch_size, certify=True, shuffle=True,
                                  seed=config.seed, epoch=0)][:num_batches]
  batches = [exp.put(exp.family.lowering.lower(builder, examples, labels, b.indices[b.indices >= 0],
                                      config.batch_size, True)) for b in order]

  def loss(params, batch, key):
    return objective(nnx.merge(exp.graphdef, params, exp.rest), batch, key, 0)[0]

  gradient = jax.jit(jax.value_and_grad(loss))
  key = jax.random.key(config.seed)

  def one_pass():
    tic, cpu = time.perf_counter(), time.process_time()
    out = jax.block_until_ready([gradient(exp.params, b, key) for b in batches])
    return time.perf_counter() - tic, time.process_time() - cpu, out

  compile_s, _, checks = one_pass()
  losses = [float(value) for value, _ in checks]
  grad_norms = [float(optax.global_norm(g)) for _, g in checks]
  runs = [one_pass()[:2] for _ in range(repeats)]
  walls = sorted(wall for wall, _ in runs)
  d = jax.devices()[0]
  return {"benchmark": "tree_arc_gradient_steps", "row": row, "space": config.space,
          "batch_size": config.batch_size, "batches": len(batches),
          "nodes": [int(b.trees.token_ids.shape[1]) for b in batches],
          "steps": [int(b.trees.schedule.shape[0]) for b in batches],
          "steps_per_s": round(len(batches) / walls[0], 3),
          "median_steps_per_s": round(len(batches) / walls[len(walls) // 2], 3),
          "cpu_steps_per_s": round(len(batches) / min(cpu for _, cpu in runs), 3),
          "first_pass_s": round(compile_s, 1), "losses": losses, "grad_norms": grad_norms,
          "device": f"{d.platform}:{d.device_kind} x{jax.device_count()}",
          "load": revisions.load()}


def compare(lines: list[dict], baseline: str) -> dict:
  best = {(rev, key): max(l[key] for l in lines if l["revision"] == rev)
          for rev in (baseline, "current") for key in ("steps_per_s", "cpu_steps_per_s")}
  first = {rev: next(l for l in lines if l["revision"] == rev) for rev in (baseline, "current")}
  old, new = first[baseline], first["current"]
  same_masks = old["nodes"] == new["nodes"]  # dropout masks have the padded shape
  return {"benchmark": "tree_train_compare", "row": new["row"], "space": new["space"],
          **{f"{rev}_{key}": value for (rev, key), value in best.items()},
          "ratio": round(best["current", "steps_per_s"] / best[baseline, "steps_per_s"], 2),
          "cpu_ratio": round(best["current", "cpu_steps_per_s"]
                             / best[baseline, "cpu_steps_per_s"], 2),
          "nodes": [old["nodes"], new["nodes"]], "same_dropout_masks": same_masks,
          "losses": [old["losses"], new["losses"]],
          **({"largest_loss_difference": float(np.max(np.abs(np.subtract(
              old["losses"], new["losses"])))),
              "largest_grad_norm_relative_difference": float(np.max(np.abs(np.subtract(
                  old["grad_norms"], new["grad_norms"])) / np.asarray(old["grad_norms"])))}
             if same_masks else {}),
          "load": revisions.load()}


def main(argv=None):
  argv = sys.argv[1:] if argv is None else argv
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--row", default="del2sub2", help="del2sub2, sub2ins2 or del2ins2")
  parser.add_argument("--batches", type=int, default=6)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--pad-to", type=int, help="pad every batch to this many nodes")
  parser.add_argument("--baseline", help="a revision to measure side by side (e.g. bf8de7d)")
  parser.add_argument("--rounds", type=int, default=1, help="alternating runs per revision")
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.baseline:
    lines = revisions.side_by_side(__file__, argv, args.baseline, args.rounds)
    for line in lines + [compare(lines, args.baseline)]:
      print(json.dumps(line), flush=True)
    return
  print(json.dumps(measure(args.row, args.batches, args.repeats, args.pad_to)), flush=True)


if __name__ == "__main__":
  sys.exit(main())
