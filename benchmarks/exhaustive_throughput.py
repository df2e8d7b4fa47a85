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

``--baseline REV --pairs P`` instead times the search as it is in REV and in this checkout, both
compiled and kept alive, their passes alternating (benchmarks/revisions.py); the compare line
gives the paired ratio and whether both classified the same members with the same outcomes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import revisions
from arc_jax import parallel
from arc_jax.evaluation import restore_run


def prepare(args, parser: argparse.ArgumentParser):
  """``search(waiting)`` over the chosen examples, and the fields every line of the run shares."""
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
      return family.searches.enumerate(placed, space, experiment.builder, *chosen, shortcut=True,
                              batch_size=256, progress=False)
    finally:
      parallel.gathered = gathered

  return search, {"benchmark": "exhaustive_throughput", "run": args.workdir,
                  "step": meta["step"], "space": experiment.config.space,
                  "examples": len(picked)}


def timed(search, waiting: bool = False):
  """(result, seconds, CPU seconds) of one search."""
  tic, cpu = time.perf_counter(), time.process_time()
  result = search(waiting)
  return result, time.perf_counter() - tic, time.process_time() - cpu


def outcome(result) -> dict:
  return {"members": int(result.members_evaluated.sum()),
          "members_evaluated": result.members_evaluated.tolist(),
          "robust": result.robust.astype(int).tolist()}


def serve(search, shared: dict) -> None:
  """The child of an interleaved run: compiles (one pass), then times one search per line of
  stdin (``revisions.serve_passes``) and prints the outcome of the last one."""
  result = search(False)
  last = []

  def one_pass(_):
    result, seconds, cpu_seconds = timed(search)
    last[:] = [result]
    return seconds, cpu_seconds

  revisions.serve_passes(one_pass)
  print(json.dumps({**shared, **outcome(last[0] if last else result)}), flush=True)


def compare(passes: list[dict], results: list[dict], baseline: str) -> dict:
  by_revision = {r["revision"]: r for r in results}
  base, current = by_revision[baseline], by_revision["current"]
  best = {rev: round(by_revision[rev]["members"] / min(p["seconds"] for p in passes
                                                       if p["revision"] == rev), 1)
          for rev in (baseline, "current")}
  return {"benchmark": "exhaustive_compare", "run": current["run"], "space": current["space"],
          "examples": current["examples"], "members": current["members"],
          "best_members_per_s": best,
          "same_outcome": all(base[k] == current[k] for k in ("members_evaluated", "robust")),
          **revisions.paired_ratios(passes, baseline), "load": revisions.load()}


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True, help="a run directory or results/ folder")
  parser.add_argument("--split", default="test", choices=("train", "validation", "test"))
  parser.add_argument("--examples", type=int, default=12)
  parser.add_argument("--min-size", type=int, default=2000)
  parser.add_argument("--max-size", type=int, default=6000)
  parser.add_argument("--pairs", type=int, default=3)
  parser.add_argument("--baseline", help="a revision to measure side by side, passes alternating")
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.baseline:
    passes, results = revisions.interleaved(__file__, argv, args.baseline, args.pairs, ["ex"])
    for line in ([{"benchmark": "exhaustive_pass", **p} for p in passes] + results
                 + [compare(passes, results, args.baseline)]):
      print(json.dumps(line), flush=True)
    return 0
  search, shared = prepare(args, parser)
  if args.serve:
    serve(search, shared)
    return 0
  rates: dict[str, list[float]] = {"in_flight": [], "waiting": []}
  for rep in range(args.pairs + 1):
    for variant in rates:
      result, seconds, cpu_seconds = timed(search, variant == "waiting")
      members = int(result.members_evaluated.sum())
      line = {**shared, "variant": variant, "pass": rep, "members": members,
              "robust": int(result.robust.sum()), "seconds": round(seconds, 2),
              "cpu_seconds": round(cpu_seconds, 2),
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
