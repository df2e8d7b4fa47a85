"""results/README.md's generated tables and the figures in results/figures/, from the results JSON
alone: each paper table with ours beside the paper's numbers (see experiments/reproduce.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import runs
from arc_jax.cli.report import METRICS
from paper import Cell, Run

FIGURES = runs.RESULTS / "figures"
GENERATED_BEGIN = "<!-- reproduce.py: generated tables begin -->"
GENERATED_END = "<!-- reproduce.py: generated tables end -->"


def _fmt(value: float | None) -> str:
  return "–" if value is None else f"{value:.1f}"


def measured(cell: Cell) -> dict[str, float]:
  """Metric → percent, over the cell's results files; ``size``: the largest |S(x)| of the split
  (every evaluation records it); ``exact_upper``: the exact verifier's proofs plus its unknowns,
  the most ``exact`` can be; ``ex`` of a cell ``ex_by_verifier`` is ``exact`` when it has no
  unknowns."""
  out, unknowns = {}, None
  for evaluation in cell.evaluations:
    results = runs.find_result(evaluation)
    if results is None:
      continue
    if "space_size" in results:
      out["size"] = results["space_size"]["max"]
    for metric in evaluation.metrics:
      value = results["metrics"][metric]
      out[metric] = 100 * value["value"]
      if metric == "exact":
        out["exact_upper"] = 100 * (value["proofs"] + value["unknowns"]) / value["total"]
        unknowns = value["unknowns"]
  if cell.ex_by_verifier and unknowns == 0:
    out.setdefault("ex", out["exact"])
  return out


def _model_size(run: Run) -> str:
  """`` (464 KB)`` for a kept model, else ``""``."""
  folder = runs.RESULTS / run.name / "model"
  if not runs.kept(run):
    return ""
  return f" ({sum(f.stat().st_size for f in folder.iterdir()) / 1024:.0f} KB)"


def _short(state: runs.State) -> str:
  """The state for the README: what blocks it, or how long the rest takes."""
  if state.state == "missing":
    legacy = ", no model kept" if "no model" in state.detail else ""
    return f"missing (~{state.minutes:g} min{legacy})"
  return state.state


def tables(selected: list[Cell], runs_dir: Path) -> str:
  """Markdown: one table per paper table, ours beside the paper's, gaps over 3 points named."""
  active = runs._active_workdirs(runs_dir)
  parts = []
  for table in dict.fromkeys(c.table for c in selected):
    in_table = [c for c in selected if c.table == table]
    exact = any("exact" in e.metrics for c in in_table for e in c.evaluations)
    lines = [f"### {table}", "", "| row | space | run | Acc | HF | CF | EX | "
             + ("exact (≤ with unknowns) | " if exact else "")
             + "paper Acc / HF / CF / EX | gaps > 3 | state |",
             "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if exact else "")]
    for cell in in_table:
      ours = measured(cell)
      state = runs.cell_state(cell, runs_dir, active)
      gaps = [f"{m.upper()} {ours[m] - cell.paper[m]:+.1f}" for m in METRICS
              if cell.paper.get(m) is not None and m in ours
              and abs(ours[m] - cell.paper[m]) > 3]
      paper_values = " / ".join(_fmt(cell.paper.get(m)) for m in METRICS) if cell.paper else "–"
      run = cell.evaluations[0].run
      lines.append(f"| {cell.row} | `{cell.column}` | {run.name}{_model_size(run)} | "
                   + " | ".join(_fmt(ours.get(m)) for m in METRICS)
                   + (f" | {_fmt(ours.get('exact'))} (≤ {_fmt(ours.get('exact_upper'))})"
                      if exact else "")
                   + f" | {paper_values} | {', '.join(gaps)} | {_short(state)} |")
    parts.append("\n".join(lines))
  return "\n\n".join(parts) + "\n"


def figures(all_cells: list[Cell]) -> list[Path]:
  """The δ figure, the ARC-A3T δ figures and every kept run's learning curves, from the JSON."""
  import plots  # noqa: PLC0415  (matplotlib only for the figures)

  for stale in [*FIGURES.glob("*.png"), *FIGURES.glob("curves/*.png")]:
    stale.unlink()  # every figure is redrawn from the JSON; none may outlive its data
  written = []
  delta_points, sizes = {}, {}
  for cell in (c for c in all_cells if c.table == "δ figure"):
    values = measured(cell)
    delta = int(cell.column.split("=")[1])
    if "size" in values:
      sizes[delta] = values.pop("size")
    if values:
      delta_points[delta] = values
  if delta_points:
    written.append(plots.robustness_vs_delta(
        {"ARC LSTM": delta_points}, ("acc", "hf", "exact", "ex", "cf"), FIGURES / "delta.png",
        "ARC LSTM trained on [(Ins,2),(Sub,2)], tested on [(Ins,δ),(Sub,δ)]", sizes or None))
  for first in ("Del", "Ins"):
    series: dict[str, dict[int, dict[str, float]]] = {}
    for cell in all_cells:
      if cell.table not in ("ARC-A3T table", "ARC-A3T figures"):
        continue
      match = re.fullmatch(rf"\[\({first},(\d)\),\(Sub,\1\)\]", cell.column.replace(" ", ""))
      values = measured(cell)
      if match and values:
        series.setdefault(cell.row, {})[int(match.group(1))] = values
    for metric in ("ex", "cf"):  # a line needs two δs
      if any(sum(metric in v for v in points.values()) > 1 for points in series.values()):
        written.append(plots.robustness_vs_delta(
            series, (metric,), FIGURES / f"arc_a3t_{first.lower()}_{metric}.png",
            f"ARC-A3T: {metric.upper()} Acc on [({first},δ),(Sub,δ)]"))
  for folder in sorted(p for p in runs.RESULTS.iterdir() if (p / "metrics.jsonl").exists()):
    written.append(plots.learning_curves(folder / "metrics.jsonl",
                                         FIGURES / "curves" / f"{folder.name}.png"))
  return written


def figure_list(paths: list[Path]) -> str:
  """Markdown: the δ figures shown, the learning curves linked."""
  shown = [p for p in paths if p.parent == FIGURES]
  curves = [p for p in paths if p.parent != FIGURES]
  lines = ["### Figures", ""]
  lines += [f"![{p.stem}]({p.relative_to(runs.RESULTS)})" for p in shown] or [
      "No δ figure yet: its evaluations are missing (see the δ figure and ARC-A3T rows above)."]
  if curves:
    lines += ["", "Learning curves (loss, dev Acc and CF, λ and ε): " + ", ".join(
        f"[{p.stem}]({p.relative_to(runs.RESULTS)})" for p in curves) + "."]
  return "\n".join(lines) + "\n"


def write_readme(selected: list[Cell], runs_dir: Path, figure_paths: list[Path] = ()) -> None:
  """Replaces the generated part of results/README.md (between the markers) with the tables
  and the list of figures."""
  readme = runs.RESULTS / "README.md"
  text = readme.read_text() if readme.exists() else "# Results\n"
  block = (f"{GENERATED_BEGIN}\n{tables(selected, runs_dir)}\n"
           f"{figure_list(list(figure_paths))}{GENERATED_END}")
  if GENERATED_BEGIN in text and GENERATED_END in text:
    head, rest = text.split(GENERATED_BEGIN, 1)
    text = head + block + rest.split(GENERATED_END, 1)[1]
  else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
  readme.write_text(text)
