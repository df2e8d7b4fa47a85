"""Adds the per-example table to committed results by re-evaluating them, and checks that the
re-evaluation reproduces every count.

Results written before evaluations kept per-example tables hold counts only. For each results
file given (or every ``results/*/eval/*.json`` without a ``per_example_file``), this re-runs the
same evaluation (split, space, lexicon, example subset, metrics, shortcut or audit, beam, the
verifier's node limit) on the run's kept model, refuses to write anything unless every metric's
count and the checkpoint are the committed ones, and then writes the table beside the file
(:mod:`arc_jax.per_example`) and adds its name to the JSON, whose numbers
stay as committed (the timings of the re-evaluation are not theirs).

  python experiments/per_example.py --max-seconds 120      # every file that took under 2 min
  python experiments/per_example.py results/normal_lstm/eval/test_Del2Sub2.json

Cheapest first (by the seconds each file records); ``--max-seconds`` skips the files whose
metrics took longer when they were made.
"""

import argparse
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pending(root: pathlib.Path) -> list[pathlib.Path]:
  """The committed results files without a per-example table."""
  out = []
  for path in sorted(root.glob("results/*/eval/*.json")):
    results = json.loads(path.read_text())
    if "metrics" in results and "per_example_file" not in results:
      out.append(path)
  return out


def recorded_seconds(results: dict) -> float:
  return sum(metric.get("seconds", 0.0) for metric in results["metrics"].values())


def reevaluate(path: pathlib.Path) -> dict:
  """Re-runs the evaluation of ``path``; writes its table only if every count is reproduced.

  Returns a JSON-ready line: the file, the seconds taken, and ``reproduced`` (or the
  differences)."""
  # pylint: disable=import-outside-toplevel  (JAX starts only when there is work)
  from arc_jax import per_example
  from arc_jax.evaluation import PER_EXAMPLE, evaluate_run
  committed = json.loads(path.read_text())
  metrics = committed["metrics"]
  run = path.parent.parent
  options = {"beam": metrics["hf"]["beam"]} if "hf" in metrics else {}
  if "exact" in metrics and "max_nodes" in metrics["exact"]:
    options["exact_max_nodes"] = metrics["exact"]["max_nodes"]
  if "exact" in metrics:  # files from before the rule was recorded were searched by "last"
    options["exact_window_rule"] = metrics["exact"].get("window_rule", "last")
  shortcut = metrics.get("ex", {}).get("shortcut", True)
  tic = time.perf_counter()
  fresh = evaluate_run(run, space=committed["space"], split=committed["split"],
                       metrics=list(metrics), shortcut=shortcut,
                       checkpoint=committed["checkpoint"]["which"],
                       synonyms=committed["synonyms"], max_candidates=committed["max_candidates"],
                       # files from before subsets were recorded hold the whole split
                       first=committed.get("first"), progress=False, **options)
  seconds = round(time.perf_counter() - tic, 1)
  differences = {name: (metric["count"], fresh["metrics"][name]["count"])
                 for name, metric in metrics.items()
                 if fresh["metrics"][name]["count"] != metric["count"]}
  if fresh["checkpoint"] != committed["checkpoint"]:
    differences["checkpoint"] = (committed["checkpoint"], fresh["checkpoint"])
  if differences:
    return {"file": str(path), "seconds": seconds, "reproduced": False,
            "differences": differences}
  table_file = per_example.path_for(path)
  per_example.write(fresh[PER_EXAMPLE], table_file)
  path.write_text(json.dumps({**committed, "per_example_file": table_file.name}, indent=2) + "\n")
  return {"file": str(path), "seconds": seconds, "reproduced": True, "table": table_file.name}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("files", nargs="*", type=pathlib.Path,
                      help="results files (default: every committed one without a table)")
  parser.add_argument("--max-seconds", type=float, default=None,
                      help="skip files whose metrics took longer than this when made")
  args = parser.parse_args(argv)
  files = args.files or pending(ROOT)
  records = sorted((recorded_seconds(json.loads(p.read_text())), p) for p in files)
  failed = 0
  for took, path in records:
    if args.max_seconds is not None and took > args.max_seconds:
      print(json.dumps({"file": str(path), "skipped": f"took {took:.0f} s when made"}))
      continue
    line = reevaluate(path)
    failed += not line["reproduced"]
    print(json.dumps(line), flush=True)
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
