"""Results table from the runs' own JSON: ``arc-report`` or ``python experiments/report.py``
[DIR ...] [--output FILE].

Every folder (default: each folder of ``results/`` in the working directory) that holds a run's ``config.json`` and
evaluation results (``evaluate.py``'s ``<split>_<space>*.json``, in ``eval/`` or, for runs kept
before their models were, beside ``config.json``) gives one row per results file:
the model, the training method, the space and the measured Acc / HF / CF / EX in percent, next to
the paper's numbers for the same model, method and space where the paper has them. The table is
markdown; nothing in it is typed by hand.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from arc_jax.cli import common

RESULTS = Path("results")
METRICS = ("acc", "hf", "cf", "ex")
HEADER = ("Acc", "HF", "CF", "EX")

_DEL_SUB, _SUB_INS, _DEL_INS = "Del2Sub2", "Ins2Sub2", "Del2Ins2"
_REVIEW = "Sub2Trans11Trans21Trans31Trans41"
PAPER = {
    # (model, method, space key): (Acc, HF Acc, CF Acc, EX Acc), the paper's Tables 2 and 3.
    ("lstm", "normal", _DEL_SUB): (84.6, 71.9, 4.6, 68.9),
    ("lstm", "normal", _SUB_INS): (84.6, 64.0, 0.5, 55.1),
    ("lstm", "normal", _DEL_INS): (84.6, 73.7, 1.2, 65.2),
    ("lstm", "augment", _DEL_SUB): (84.0, 77.0, 5.5, 74.4),
    ("lstm", "augment", _SUB_INS): (84.7, 70.2, 0.3, 61.5),
    ("lstm", "augment", _DEL_INS): (84.5, 75.4, 0.4, 68.3),
    ("lstm", "hotflip", _DEL_SUB): (84.0, 78.7, 4.3, 74.6),
    ("lstm", "hotflip", _SUB_INS): (82.5, 75.9, 0.0, 62.0),
    ("lstm", "hotflip", _DEL_INS): (84.4, 80.6, 0.0, 68.7),
    ("lstm", "arc", _DEL_SUB): (82.5, 77.8, 72.5, 77.0),
    ("lstm", "arc", _SUB_INS): (80.2, 70.0, 55.4, 64.0),
    ("lstm", "arc", _DEL_INS): (82.6, 78.6, 69.4, 74.6),
    ("tree", "normal", _DEL_SUB): (50.3, 39.9, 4.1, 33.8),
    ("tree", "normal", _SUB_INS): (50.3, 33.4, 0.0, 17.9),
    ("tree", "normal", _DEL_INS): (50.3, 40.1, 0.0, 25.7),
    ("tree", "augment", _DEL_SUB): (47.5, 40.8, 1.4, 36.4),
    ("tree", "augment", _SUB_INS): (48.1, 37.1, 0.0, 23.0),
    ("tree", "augment", _DEL_INS): (47.6, 40.6, 0.0, 29.0),
    ("tree", "hotflip", _DEL_SUB): (49.5, 43.4, 1.6, 38.4),
    ("tree", "hotflip", _SUB_INS): (48.7, 39.5, 0.0, 29.0),
    ("tree", "hotflip", _DEL_INS): (49.5, 42.7, 0.0, 32.1),
    ("tree", "arc", _DEL_SUB): (46.4, 43.4, 30.9, 41.9),
    ("tree", "arc", _SUB_INS): (46.1, 39.0, 17.1, 37.6),
    ("tree", "arc", _DEL_INS): (46.5, 43.8, 19.2, 40.0),
    ("bilstm", "normal", _DEL_SUB): (83.0, 71.1, 8.2, 68.0),
    ("bilstm", "normal", _SUB_INS): (83.0, 63.4, 2.1, 56.1),
    ("bilstm", "normal", _DEL_INS): (83.0, 72.5, 6.4, 65.5),
    ("bilstm", "augment", _DEL_SUB): (83.2, 75.1, 8.7, 72.9),
    ("bilstm", "augment", _SUB_INS): (83.5, 66.8, 1.3, 59.1),
    ("bilstm", "augment", _DEL_INS): (84.6, 75.0, 4.6, 68.6),
    ("bilstm", "hotflip", _DEL_SUB): (83.6, 79.2, 9.2, 73.4),
    ("bilstm", "hotflip", _SUB_INS): (82.8, 76.6, 0.1, 55.5),
    ("bilstm", "hotflip", _DEL_INS): (83.5, 79.1, 0.0, 55.7),
    ("bilstm", "arc", _DEL_SUB): (83.5, 78.7, 70.9, 77.5),
    ("bilstm", "arc", _SUB_INS): (80.2, 71.4, 59.8, 66.4),
    ("bilstm", "arc", _DEL_INS): (82.6, 76.2, 66.2, 71.8),
    ("lstm", "normal", _REVIEW): (83.9, 72.4, 21.0, 71.0),
    ("lstm", "augment", _REVIEW): (79.2, 72.5, 30.5, 71.7),
    ("lstm", "hotflip", _REVIEW): (79.6, 74.3, 34.5, 72.9),
    ("lstm", "arc", _REVIEW): (82.3, 78.1, 74.2, 77.1),
    # ARC-A3T (appendix table "different instantiations of ARC-A3T"; no HF column there).
    ("lstm", "arc_a3t(Del)", _DEL_SUB): (83.2, None, 15.1, 68.6),
    ("lstm", "arc_a3t(Sub)", _DEL_SUB): (81.4, None, 71.1, 75.8),
    ("lstm", "arc_a3t(Ins)", _SUB_INS): (82.6, None, 15.9, 66.7),
    ("lstm", "arc_a3t(Sub)", _SUB_INS): (83.0, None, 48.8, 65.4),
}


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


def rows(folder: Path) -> list[dict]:
  """One row per evaluation results file of the run in ``folder`` (sorted by file name)."""
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
                "paper": PAPER.get(key)})
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
  args = parser.parse_args(argv)
  if not args.folders and not RESULTS.is_dir():
    parser.error(f"No folders given and no {RESULTS.absolute()}: pass run result folders, or "
                 "run from the repository root.")
  folders = args.folders or sorted(p for p in RESULTS.iterdir() if (p / "config.json").exists())
  missing = [str(f) for f in folders if not (f / "config.json").exists()]
  if missing:
    parser.error(f"No config.json in {', '.join(missing)}: pass folders made from run "
                 "directories (config.json plus evaluate.py's results).")
  table = markdown([row for folder in folders for row in rows(folder)])
  if args.output:
    args.output.write_text(table)
  print(table, end="")
  return 0


def run() -> None:
  """The ``arc-report`` console script."""
  sys.exit(main())


if __name__ == "__main__":
  run()
