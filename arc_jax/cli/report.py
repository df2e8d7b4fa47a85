"""Results table from the runs' own JSON: ``arc-report`` or ``python experiments/report.py``
[DIR ...] [--output FILE].

Every folder (default: each folder of ``results/`` in the working directory) that holds a run's ``config.json`` and
evaluation results (``evaluate.py``'s ``<split>_<space>*.json``, in ``eval/`` or, for runs kept
before their models were, beside ``config.json``) gives one row per results file:
the model, the training method, the space and the measured Acc / HF / CF / EX and the complete
verifier's exact robust accuracy in percent (``71.0 (≤ 71.3)`` when it left sentences unknown), next to
reference numbers for the same model, method and space where ``--paper FILE`` has them (a Python
file whose ``TABLES_2_3`` maps (model, method, space key) to (Acc, HF, CF, EX) in percent; the
paper's are ``experiments/paper.py``, which ``python experiments/report.py`` passes by default). The table is
markdown; nothing in it is typed by hand.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

from arc_jax import per_example, stats
from arc_jax.train.config import migrate
from arc_jax.cli import common

RESULTS = Path("results")
METRICS = ("acc", "hf", "cf", "ex")
HEADER = ("Acc", "HF", "CF", "EX")
COLUMNS = (*METRICS, "exact")
"""The measured columns: the paper's four metrics and the complete verifier's ``exact``."""

def space_key(spec: str) -> str:
  """Order-free key of a space spec: ``"[(Sub,2), (Del,2)]"`` → ``"Del2Sub2"`` (Dup → Ins)."""
  pairs = re.findall(r"\(\s*(\w+)\s*,\s*(\d+)\s*\)", spec)
  if not pairs:
    raise ValueError(f"No (Name,δ) pairs in the space spec {spec!r}.")
  return "".join(sorted(f"{'Ins' if name == 'Dup' else name}{delta}" for name, delta in pairs))


def model_kind(config: dict) -> str:
  """``"tree"``, ``"bilstm"`` or ``"lstm"`` from a run's config.json (either layout,
  :func:`arc_jax.train.config.migrate`)."""
  config = migrate(config)
  if config.get("model") == "tree_lstm":
    return "tree"
  return "bilstm" if config.get("lstm", {}).get("bidirectional") else "lstm"


def method_name(config: dict) -> str:
  """The run's method, with the abstracted transformations of ARC-A3T / A3T runs:
  ``"arc_a3t(Del)"``."""
  abstracted = (migrate(config).get("augmented", {}).get("abstracted")
                if config["method"] in ("arc_a3t", "a3t") else None)
  return f"{config['method']}({abstracted})" if abstracted else config["method"]


def _percent(metric: dict | None, intervals: bool = False) -> str:
  """A metric's rate in percent, with its 95% Wilson interval when ``intervals``."""
  if metric is None:
    return "–"
  if not intervals:
    return f"{100 * metric['value']:.1f}"
  lo, hi = stats.wilson_interval(metric["count"], metric["total"])
  return f"{100 * metric['value']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def _exact(metric: dict | None, intervals: bool = False) -> str:
  """The verifier's rate (:func:`_percent`), then its upper end ``(≤ ...)`` when sentences were
  left unknown: the proofs plus the unknowns."""
  if not metric or not metric.get("unknowns"):
    return _percent(metric, intervals)
  upper = (metric["count"] + metric["unknowns"]) / metric["total"]
  return f"{_percent(metric, intervals)} (≤ {100 * upper:.1f})"


def load_paper(path: Path) -> dict:
  """The reference table ``TABLES_2_3`` of the Python file at ``path`` (see the module's doc)."""
  spec = importlib.util.spec_from_file_location(f"_paper_table_{Path(path).stem}", path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module  # dataclasses in the file look their module up while loading
  try:
    spec.loader.exec_module(module)
  finally:
    del sys.modules[spec.name]
  return module.TABLES_2_3


def rows(folder: Path, paper: dict | None = None) -> list[dict]:
  """One row per evaluation results file of the run in ``folder`` (sorted by file name), with
  ``paper``'s numbers (:func:`load_paper`) for its model, method and space, if any."""
  config = json.loads((folder / "config.json").read_text())
  out = []
  for path in sorted(folder.glob("*.json")) + sorted(folder.glob("eval/*.json")):
    results = json.loads(path.read_text())
    if not isinstance(results, dict) or "metrics" not in results:
      continue  # config.json, summary.json
    metrics = results["metrics"]
    key = (model_kind(config), method_name(config), space_key(results["space"]))
    out.append({"run": folder.name, "file": path.name, "model": key[0], "method": key[1],
                "space": results["space"], "split": results["split"],
                "first": results.get("first"), "path": path,
                "measured": {m: metrics.get(m) for m in COLUMNS},
                "paper": (paper or {}).get(key)})
  return out


def markdown(table: list[dict], intervals: bool = False) -> str:
  """The rows as a markdown table (rates with 95% Wilson intervals when ``intervals``)."""
  lines = ["| run (file) | model | method | space | split | " + " | ".join(HEADER)
           + " | exact | paper " + " / ".join(HEADER) + " |",
           "|" + "---|" * (5 + len(HEADER) + 2)]
  for row in table:
    measured = [_percent(row["measured"][m], intervals) for m in METRICS]
    measured.append(_exact(row["measured"]["exact"], intervals))
    paper = " / ".join("–" if v is None else f"{v:.1f}" for v in row["paper"]) if row[
        "paper"] else "–"
    lines.append(f"| {row['run']} ({row['file']}) | {row['model']} | {row['method']} | "
                 f"`{row['space']}` | {row['split']} | " + " | ".join(measured)
                 + f" | {paper} |")
  return "\n".join(lines) + "\n"


def paired(table: list[dict]) -> list[dict]:
  """McNemar's exact test of ARC against every other method evaluated on the same model kind,
  space, split and examples, per metric both measured, from their per-example tables
  (:mod:`arc_jax.per_example`; rows without one are left out)."""
  with_tables = [row for row in table if per_example.has_table(row["path"])]
  out = []
  for arc in (row for row in with_tables if row["method"] == "arc"):
    for other in with_tables:
      same = all(other[k] == arc[k] for k in ("model", "split", "first")) and (
          space_key(other["space"]) == space_key(arc["space"]))
      if other is arc or other["method"] == "arc" or not same:
        continue
      mine, theirs = per_example.read(arc["path"]), per_example.read(other["path"])
      if mine["id"] != theirs["id"]:
        continue
      for m in COLUMNS:
        if m in mine and m in theirs:
          out.append({"model": arc["model"], "space": arc["space"], "split": arc["split"],
                      "arc": arc["run"], "other": other["run"], "method": other["method"],
                      "metric": m, **stats.mcnemar(mine[m], theirs[m])})
  return out


def paired_markdown(tests: list[dict]) -> str:
  lines = ["| model | space | split | ARC run | against | metric | only ARC | only the other "
           "| McNemar p |", "|" + "---|" * 9]
  for t in tests:
    lines.append(f"| {t['model']} | `{t['space']}` | {t['split']} | {t['arc']} | {t['other']} "
                 f"({t['method']}) | {t['metric'].upper()} | {t['only_first']} | "
                 f"{t['only_second']} | {t['p_value']:.3g} |")
  return "\n".join(lines) + "\n"


def main(argv=None) -> int:
  parser = common.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("folders", nargs="*", type=Path,
                      help="run result folders (default: every folder of results/)")
  parser.add_argument("--output", type=Path, help="also write the table here")
  parser.add_argument("--intervals", action="store_true",
                      help="print each rate with its 95%% Wilson interval")
  parser.add_argument("--paired", action="store_true",
                      help="also print McNemar's exact test of ARC against each other method on "
                      "the same model, space and examples (from the per-example tables)")
  parser.add_argument("--paper", type=Path, metavar="FILE",
                      help="Python file whose TABLES_2_3 gives the numbers to print beside the "
                      "measured ones, e.g. experiments/paper.py (default: none)")
  args = parser.parse_args(argv)
  if not args.folders and not RESULTS.is_dir():
    parser.error(f"No folders given and no {RESULTS.absolute()}: pass run result folders, or "
                 "run from the repository root.")
  folders = args.folders or sorted(p for p in RESULTS.iterdir() if (p / "config.json").exists())
  missing = [str(f) for f in folders if not (f / "config.json").exists()]
  if missing:
    parser.error(f"No config.json in {', '.join(missing)}: pass folders made from run "
                 "directories (config.json plus evaluate.py's results).")
  if args.paper is not None and not args.paper.is_file():
    parser.error(f"--paper {args.paper}: no such file.")
  paper = load_paper(args.paper) if args.paper is not None else None
  found = [row for folder in folders for row in rows(folder, paper)]
  table = markdown(found, args.intervals)
  if args.paired:
    table += "\n" + paired_markdown(paired(found))
  if args.output:
    args.output.write_text(table)
  print(table, end="")
  return 0


def run() -> None:
  """The ``arc-report`` console script."""
  sys.exit(main())


if __name__ == "__main__":
  run()
