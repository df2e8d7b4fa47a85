"""The ARC-A3T δ figures: ``python experiments/arc_a3t_delta.py RUN ... [--evaluate]
[--output-dir DIR]``.

For each trained run (the ``arc_a3t.py`` rows and the ``arc.py`` rows they are compared with) and
δ = 1..3, the run's space with every budget set to δ (``[(Del,δ),(Sub,δ)]``,
``[(Sub,δ),(Ins,δ)]``) is evaluated on the test split for Acc, CF and EX (``evaluate.py``'s
results files ``RUN/eval/test_<space>*.json``; ``--evaluate`` computes the missing ones). The
script writes ``delta.json`` (every point, from those files) and the paper's two figures,
``delta_ex.png`` and ``delta_cf.png`` (one panel per space family, one line per instantiation:
Abs-fir, Abs-sec, ARC).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from arc_jax.train.config import migrate

DELTAS = (1, 2, 3)
METRICS = ("acc", "cf", "ex")


def delta_space(spec: str, delta: int) -> str:
  """``spec`` with every budget set to ``delta``: ``"[(Del,2),(Sub,2)]"`` → ``"[(Del,3),(Sub,3)]"``."""
  names = re.findall(r"\(\s*(\w+)\s*,\s*\d+\s*\)", spec)
  if not names:
    raise ValueError(f"No (Name,δ) pairs in the space spec {spec!r}.")
  return "[" + ",".join(f"({n},{delta})" for n in names) + "]"


def family(spec: str) -> str:
  """The δ-free name of a space: ``"[(Sub,2),(Ins,2)]"`` → ``"Ins+Sub"``."""
  return "+".join(sorted(re.findall(r"\(\s*(\w+)\s*,", spec)))


def instantiation(config: dict) -> str:
  """``"ARC"`` (everything abstracted), ``"Abs-sec"`` (Sub abstracted) or ``"Abs-fir"``."""
  if config["method"] == "arc":
    return "ARC"
  if config["method"] != "arc_a3t":
    raise ValueError(f"{config['name']}: method {config['method']!r} is not ARC or ARC-A3T.")
  return "Abs-sec" if migrate(config)["augmented"]["abstracted"] == "Sub" else "Abs-fir"


def _results(run: Path, space: str, evaluate: bool) -> dict | None:
  """The run's test results under ``space`` with acc, cf and ex (evaluated if asked)."""
  from arc_jax.evaluation import evaluate_run, results_path, write_results  # heavy imports
  key = re.sub(r"[^A-Za-z0-9]+", "", space)
  for path in sorted((run / "eval").glob(f"test_{key}*.json")):
    results = json.loads(path.read_text())
    if set(METRICS) <= set(results["metrics"]) and results["metrics"]["ex"].get("shortcut", True):
      return results
  if not evaluate:
    return None
  results = evaluate_run(run, space=space, split="test", metrics=list(METRICS), progress=False)
  write_results(results, results_path(run, results, shortcut=True))
  return results


def collect(runs: list[Path], evaluate: bool) -> tuple[list[dict], list[str]]:
  """(points, missing): one point per run and δ with its Acc / CF / EX."""
  points, missing = [], []
  for run in runs:
    config = json.loads((run / "config.json").read_text())
    for delta in DELTAS:
      space = delta_space(config["space"], delta)
      results = _results(run, space, evaluate)
      if results is None:
        missing.append(f"{run} under {space}")
        continue
      points.append({"run": run.name, "instantiation": instantiation(config),
                     "family": family(config["space"]), "delta": delta, "space": space,
                     **{m: results["metrics"][m]["value"] for m in METRICS}})
  return points, missing


def plot(points: list[dict], metric: str, path: Path) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  families = sorted({p["family"] for p in points})
  fig, axes = plt.subplots(1, len(families), figsize=(4.5 * len(families), 3.4), squeeze=False)
  for ax, fam in zip(axes[0], families):
    for name in ("Abs-fir", "Abs-sec", "ARC"):
      line = sorted((p["delta"], 100 * p[metric]) for p in points
                    if p["family"] == fam and p["instantiation"] == name)
      if line:
        ax.plot(*zip(*line), marker="o", label=name)
    ax.set_title(fam.replace("+", ", ") + " (δ each)")
    ax.set_xlabel("δ")
    ax.set_xticks(DELTAS)
    ax.set_ylabel(f"{metric.upper()} Acc (%)")
    ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=150)
  plt.close(fig)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("runs", nargs="+", type=Path, help="run directories (arc_a3t and arc)")
  parser.add_argument("--evaluate", action="store_true",
                      help="evaluate the missing (run, δ) pairs (acc, cf, ex on test)")
  parser.add_argument("--output-dir", type=Path, default=Path("results") / "arc_a3t")
  args = parser.parse_args(argv)
  bad = [str(r) for r in args.runs if not (r / "config.json").exists()]
  if bad:
    parser.error(f"No config.json in {', '.join(bad)}: pass run directories of train.py.")
  points, missing = collect(args.runs, args.evaluate)
  if missing:
    print("error: no test results with acc, cf and ex for " + "; ".join(missing)
          + ". Run again with --evaluate (or evaluate.py --space ...).", file=sys.stderr)
    return 2
  args.output_dir.mkdir(parents=True, exist_ok=True)
  (args.output_dir / "delta.json").write_text(json.dumps(points, indent=2) + "\n")
  for metric in ("ex", "cf"):
    plot(points, metric, args.output_dir / f"delta_{metric}.png")
  print(json.dumps(points, indent=2))
  return 0


if __name__ == "__main__":
  sys.exit(main())
