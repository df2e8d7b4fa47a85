"""EX throughput (members of S(x) classified per second) with and without a batch in flight.

Restores a run's best checkpoint (or the kept model of a ``results/`` folder) and runs the
exhaustive search (:mod:`arc_jax.attacks.exhaustive`) on the same examples of a split, in
alternating passes: ``in_flight``, the search as it is (the next batch is enumerated and lowered
while the device classifies the last one), and ``waiting``, the same search whose predictor
waits for its logits before returning (host and device take turns). Both classify the same
members, so the paired ratio of their members/s is what the overlap buys. One JSON line per pass,
then one with the paired median ratio. The examples are the first ``--examples`` of the split
whose space has between ``--min-size`` and ``--max-size`` application choices (so that a pass
takes seconds, not hours); the first pass of each variant is dropped (compilation).

    python benchmarks/exhaustive_throughput.py --workdir results/hotflip_tree_sub2ins2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from arc_jax import parallel
from arc_jax.evaluation import restore_run


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True, help="a run directory or results/ folder")
  parser.add_argument("--split", default="test", choices=("train", "validation", "test"))
  parser.add_argument("--examples", type=int, default=12)
  parser.add_argument("--min-size", type=int, default=2000)
  parser.add_argument("--max-size", type=int, default=6000)
  parser.add_argument("--pairs", type=int, default=3)
  args = parser.parse_args(argv)
  params, meta, experiment = restore_run(args.workdir)
  space, family = experiment.space, experiment.family
  examples, labels = experiment.examples(args.split)
  picked = [i for i, x in enumerate(examples)
            if args.min_size <= space.count(x) <= args.max_size][:args.examples]
  if not picked:
    parser.error(f"No {args.split} example has between {args.min_size} and {args.max_size} "
                 "application choices; widen --min-size/--max-size.")
  chosen = ([examples[i] for i in picked], labels[picked], np.zeros(len(picked), bool))
  placed = experiment.placed(params)

  def search(waiting: bool):
    # "waiting": the families' predictors return what parallel.gathered gives; made to wait.
    gathered = parallel.gathered
    if waiting:
      parallel.gathered = lambda x: np.asarray(gathered(x))
    try:
      return family.enumerate(placed, space, experiment.builder, *chosen, shortcut=True,
                              batch_size=256, progress=False)
    finally:
      parallel.gathered = gathered

  rates: dict[str, list[float]] = {"in_flight": [], "waiting": []}
  for rep in range(args.pairs + 1):
    for variant in rates:
      tic, cpu = time.perf_counter(), time.process_time()
      result = search(variant == "waiting")
      seconds = time.perf_counter() - tic
      members = int(result.members_evaluated.sum())
      line = {"benchmark": "exhaustive_throughput", "run": args.workdir, "step": meta["step"],
              "space": experiment.config.space, "examples": len(picked), "variant": variant,
              "pass": rep, "members": members, "robust": int(result.robust.sum()),
              "seconds": round(seconds, 2),
              "cpu_seconds": round(time.process_time() - cpu, 2),
              "members_per_s": round(members / seconds, 1), "warm_up": rep == 0}
      print(json.dumps(line), flush=True)
      if rep:
        rates[variant].append(members / seconds)
  ratios = [a / b for a, b in zip(rates["in_flight"], rates["waiting"])]
  print(json.dumps({"benchmark": "exhaustive_throughput", "compare": "in_flight/waiting",
                    "paired_median": round(statistics.median(ratios), 3),
                    "range": [round(min(ratios), 3), round(max(ratios), 3)]}), flush=True)
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
