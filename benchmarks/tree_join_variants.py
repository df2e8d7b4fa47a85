"""Certified accuracy of a trained Tree-LSTM run under both joins of the tree DP.

Restores a run's best checkpoint (or the kept model of a ``results/`` folder) and certifies a
split (default test, the run's space) twice: with the merge joining the splits of a slot after the
cell (``join="after_cell"``, ours) and before it (``"before_cell"``, the original's), then prints
one JSON line with both CF Acc, their difference in points, and how many trees only one of them
certifies (``before_cell`` alone must be 0: its boxes contain ours). Seconds include compilation.

    python benchmarks/tree_join_variants.py --workdir RUN [--split test]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from arc_jax.certify.tree_dp import JOINS
from arc_jax.evaluation import restore_run
from arc_jax.train import RunDirectory, evaluate_split, make_eval_step
from arc_jax.train.objectives import certify_rows


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True, help="a Tree-LSTM run directory")
  parser.add_argument("--split", default="test", choices=("train", "validation", "test"))
  args = parser.parse_args(argv)
  model = RunDirectory(args.workdir).config().model
  if model != "tree_lstm":
    parser.error(f"{args.workdir} is a {model!r} run; the joins are the Tree-LSTM DP's.")
  params, meta, experiment = restore_run(args.workdir)
  config = experiment.config
  mesh = experiment.mesh
  signature = experiment.space.signature
  certified, line = {}, {"benchmark": "tree_join_variants", "run": args.workdir,
                         "step": meta["step"], "split": args.split, "space": config.space,
                         "trees": len(experiment.splits[args.split])}
  for join in JOINS:
    tic = time.perf_counter()
    flags = evaluate_split(
        make_eval_step(experiment.graphdef,
                       certify_rows(experiment.family, signature, join=join), mesh),
        params, experiment.rest,
        experiment.batches(args.split, config.eval_batch_size, certify=True),
        line["trees"], experiment.put)
    certified[join] = flags["certified"]
    line[join] = {"certified": int(flags["certified"].sum()),
                  "cf_acc": round(float(flags["certified"].mean()), 6),
                  "seconds": round(time.perf_counter() - tic, 2)}
  after, before = certified["after_cell"], certified["before_cell"]
  line["cf_difference_points"] = round(100 * float(after.mean() - before.mean()), 2)
  line["only_after_cell"] = int(np.sum(after & ~before))
  line["only_before_cell"] = int(np.sum(before & ~after))
  print(json.dumps(line), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
