"""Results table from the runs' own JSON: ``arc-report`` or ``python experiments/report.py``
[DIR ...] [--output FILE].

Every folder (default: each folder of ``results/`` in the working directory) that holds a run's ``config.json`` and
evaluation results (``evaluate.py``'s ``<split>_<space>*.json``, in ``eval/`` or, for runs kept
before their models were, beside ``config.json``) gives one row per results file:
the model, the training method, the space and the measured Acc / HF / CF / EX in percent, next to
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

from arc_jax.cli import common

RESULTS = Path("results")
METRICS = ("acc", "hf", "cf", "ex")
HEADER = ("Acc", "HF", "CF", "EX")

def space_key(spec: str) -> str:
  """Order-free key of a space spec: ``"[(Sub,2), (Del,2)]"`` → ``"Del2Sub2"`` (Dup → Ins)."""
  pairs = re.findall(r"\(\s*(\w+)\s*,\s*(\d+)\s*\)", spec)
  if not pairs:
    raise ValueError(f"No (Name,δ) pairs in the space spec {spec!r}.")
  return "".join(sorted(f"{'Ins' if name == 'Dup' else name}{delta}" for name, delta in pairs))


def model_kind(config: dict) -> str:
  """``"tree"``, ``"bilstm"`` or ``"lstm"`` from a run's config.json."""
  if config.get("model") == "tree_lstm":
    return "tree"
  return "bilstm" if config.get("bidirectional") else "lstm"


def method_name(config: dict) -> str:
  """The run's method, with the abstracted transformations of ARC-A3T / A3T runs:
  ``"arc_a3t(Del)"``."""
  abstracted = config.get("abstracted") if config["method"] in ("arc_a3t", "a3t") else None
  return f"{config['method']}({abstracted})" if abstracted else config["method"]


def _percent(value: float | None) -> str:
  return "–" if value is None else f"{100 * value:.1f}"


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
                "measured": {m: metrics[m]["value"] if m in metrics else None for m in METRICS},
                "paper": (paper or {}).get(key)})
  return out


def markdown(table: list[dict]) -> str:
  lines = ["| run (file) | model | method | space | split | " + " | ".join(HEADER)
           + " | paper " + " / ".join(HEADER) + " |",
           "|" + "---|" * (5 + len(HEADER) + 1)]
  for row in table:
    measured = [_percent(row["measured"][m]) for m in METRICS]
    paper = " / ".join("–" if v is None else f"{v:.1f}" for v in row["paper"]) if row[
        "paper"] else "–"
    lines.append(f"| {row['run']} ({row['file']}) | {row['model']} | {row['method']} | "
                 f"`{row['space']}` | {row['split']} | " + " | ".join(measured)
                 + f" | {paper} |")
  return "\n".join(lines) + "\n"


def main(argv=None) -> int:
  parser = common.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("folders", nargs="*", type=Path,
                      help="run result folders (default: every folder of results/)")
  parser.add_argument("--output", type=Path, help="also write the table here")
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
  table = markdown([row for folder in folders for row in rows(folder, paper)])
  if args.output:
    args.output.write_text(table)
  print(table, end="")
  return 0


def run() -> None:
  """The ``arc-report`` console script."""
  sys.exit(main())


if __name__ == "__main__":
  run()
