"""Cost of an ARC-A3T / A3T training step against ARC's, side by side in one process, one JSON.

For one space (``del2sub2`` or ``sub2ins2``), the rows ARC (``arc.py:lstm,SPACE``), Abs-fir and
Abs-sec (``arc_a3t.py:SPACE,first|second``) and A3T (``a3t.py:SPACE``) are built from their
configs on the real SST-2 data (hidden-100 LSTM, batch 32, λ = λ_max, ε = 1) and train on the
same first ``--batches`` batches of epoch 0:

    python benchmarks/arc_a3t_cost.py [--space del2sub2] [--batches 20] [--rows arc,first,...]

A first pass compiles (``warmup_s``); a second pass over the same batches is timed: per batch,
``transform_s`` (host: exploring S_aug(x), ARC-A3T by enumeration and scoring every member,
A3T by HotFlip, and building the masked plans) and ``step_s`` (the jitted certified step on the
B·(k+1) rows, waited for). ``members_per_example`` is the mean size of S_aug(x) that ARC-A3T
enumerates; ``vs_arc`` divides each row's seconds per batch by ARC's.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np
import optax

from arc_jax import parallel
from arc_jax.perturbation.split import split_space
from arc_jax.train import METHODS, build_experiment
from arc_jax.train.steps import config_optimizer, init_state, make_train_step, zero_totals

ROWS = ("arc", "first", "second", "a3t")


def _config(row: str, space: str):
  import importlib.util
  from pathlib import Path
  name, arg = {"arc": ("arc", f"lstm,{space}"), "a3t": ("a3t", space)}.get(
      row, ("arc_a3t", f"{space},{row}"))
  path = Path(__file__).resolve().parents[1] / "experiments" / "configs" / f"{name}.py"
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def measure(row: str, space: str, batches: int) -> dict:
  config = _config(row, space)
  config.progress = False
  experiment = build_experiment(config)
  method = METHODS[config.method]
  weight, eps = optax.constant_schedule(config.lambda_max), optax.constant_schedule(1.0)
  tx = config_optimizer(config)
  step_fn = make_train_step(experiment.graphdef, tx, method.objective(experiment, weight, eps),
                            experiment.mesh)
  transform = method.batch_transform(experiment) if method.batch_transform else None
  source = list(experiment.batches("train", config.batch_size, certify=transform is None,
                                   shuffle=True))[:batches]
  replicated = parallel.replicated(experiment.mesh)
  state = parallel.put(init_state(experiment.params, tx, 0), replicated)
  totals = parallel.put(zero_totals(), replicated)

  def one_pass(state, totals):
    transform_s = step_s = 0.0
    for i, batch in enumerate(source):
      tic = time.perf_counter()
      if transform is not None:
        batch = transform(batch, i, state.params)
      toc = time.perf_counter()
      state, totals = step_fn(state, experiment.rest, experiment.put(batch), totals)
      jax.block_until_ready(state)
      transform_s += toc - tic
      step_s += time.perf_counter() - toc
    return state, totals, transform_s, step_s

  tic = time.perf_counter()
  state, totals, *_ = one_pass(state, totals)
  warmup_s = time.perf_counter() - tic
  state, totals, transform_s, step_s = one_pass(state, totals)
  out = {"row": row, "method": config.method, "abstracted": config.augmented.abstracted or None,
         "augment_search": config.augmented.augment_search if transform else None,
         "rows_per_batch": config.batch_size * ((config.augmented.augment_members + 1) if transform else 1),
         "transform_s": round(transform_s / len(source), 4),
         "step_s": round(step_s / len(source), 4),
         "seconds_per_batch": round((transform_s + step_s) / len(source), 4),
         "warmup_s": round(warmup_s, 2)}
  if config.method == "arc_a3t":
    split = split_space(experiment.space, config.augmented.abstracted)
    train = experiment.splits["train"]
    sizes = [len(split.members(train.tokens[i])) for b in source for i in b.indices if i >= 0]
    out["members_per_example"] = round(float(np.mean(sizes)), 1)
    out["members_max"] = int(np.max(sizes))
  return out


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--space", choices=("del2sub2", "sub2ins2"), default="del2sub2")
  parser.add_argument("--batches", type=int, default=20)
  parser.add_argument("--rows", default=",".join(ROWS), help=f"subset of {','.join(ROWS)}")
  args = parser.parse_args()
  rows = [measure(r, args.space, args.batches) for r in args.rows.split(",")]
  base = next((r["seconds_per_batch"] for r in rows if r["row"] == "arc"), None)
  for r in rows:
    r["vs_arc"] = round(r["seconds_per_batch"] / base, 2) if base else None
  print(json.dumps({"benchmark": "arc_a3t_training_step_sst2", "space": args.space,
                    "batches": args.batches, "devices": jax.device_count(),
                    "device": jax.devices()[0].device_kind, "rows": rows}))


if __name__ == "__main__":
  main()
