"""results/README.md's generated tables and the figures in results/figures/, from the results JSON
alone: each paper table with ours beside the paper's numbers (see experiments/reproduce.py), every
rate with its 95% Wilson interval, a mean ± sd row wherever runs of seeds 1 and 2 are kept beside
seed 0's, and McNemar's paired test of ARC against each baseline from the per-example tables
(arc_jax.stats, arc_jax.per_example; tests/test_doc_numbers.py recomputes them).
"""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from pathlib import Path

import runs
from arc_jax import per_example, stats
from arc_jax.cli.report import METRICS, space_key
from paper import Cell, Run

FIGURES = runs.RESULTS / "figures"
GENERATED_BEGIN = "<!-- reproduce.py: generated tables begin -->"
GENERATED_END = "<!-- reproduce.py: generated tables end -->"


SEEDS = (0, 1, 2)
"""The training seeds a cell's mean ± sd is over: seed 0 is the run itself, seed s > 0 the run
``<run>_seed<s>`` (the name ``arc_jax.train.config.run_name`` gives a ``--config.seed=s``
override)."""
PAIRED_METRICS = ("cf", "ex")
"""The rates the paired table compares ARC with each baseline on."""

INTERVALS_NOTE = (
    "Each of our rates is a percentage with its 95% Wilson score interval in brackets, "
    "`74.5 [72.5, 76.5]`, from the count and n its results file records (`arc_jax.stats`; "
    "about ±2 points at n = 1,821, ±9 on 100 sentences); the paper's numbers, whose counts are "
    "not published, have none. Each row is one training run (seed 0); where runs of seeds 1 and 2 "
    "are kept too (`<run>_seed1`, `<run>_seed2`), a row below it gives the mean ± sd (sample sd) "
    "over the seeds done{none_yet}. An EX marked (verifier) is the complete verifier's exact "
    "robust accuracy, not enumeration: EX itself when it leaves no example unknown (δ = 3, "
    "where enumeration is not run). The paired table tests ARC against each baseline on the "
    "same examples.")
"""The line above the generated tables; ``{none_yet}`` says when no cell has two seeds yet."""


def _fmt(value: float | None) -> str:
  return "–" if value is None else f"{value:.1f}"


def _fmt_interval(metric: dict) -> str:
  """``74.5 [72.4, 76.5]``: a results file's metric in percent with its 95% Wilson interval."""
  lo, hi = stats.wilson_interval(metric["count"], metric["total"])
  return f"{100 * metric['value']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def _rate(metric: str, ours: dict[str, float], found: dict) -> str:
  """A rate of :func:`measured` (``ours``), with its interval where :func:`sources` (``found``)
  has its counts."""
  return _fmt_interval(found[metric][1]) if metric in found else _fmt(ours.get(metric))


def ex_from_verifier(cell: Cell, ours: dict[str, float]) -> bool:
  """Whether the EX of :func:`measured` (``ours``) is the complete verifier's ``exact``: a cell
  ``ex_by_verifier`` that enumerates nothing."""
  return (cell.ex_by_verifier and "ex" in ours
          and not any("ex" in e.metrics for e in cell.evaluations))


def _fmt_mean_sd(value: tuple[float, float] | None) -> str:
  return "–" if value is None else f"{value[0]:.1f} ± {value[1]:.1f}"


def result_path(evaluation) -> Path | None:
  """The results file :func:`runs.find_result` reads for ``evaluation``, or None."""
  results = runs.find_result(evaluation)
  if results is None:
    return None
  return next(p for p in runs.results_files(evaluation.run.name)
              if json.loads(p.read_text()) == results)


def sources(cell: Cell) -> dict[str, tuple[Path, dict, str]]:
  """Metric → (results file, its metric record, the name of the metric in it and of its column
  in the per-example table), over the cell's evaluations as :func:`measured` reads them: the
  later evaluation wins, and ``ex`` of a cell ``ex_by_verifier`` is its ``exact`` when that has
  no unknowns."""
  out = {}
  for evaluation in cell.evaluations:
    path = result_path(evaluation)
    if path is None:
      continue
    metrics = json.loads(path.read_text())["metrics"]
    for metric in evaluation.metrics:
      out[metric] = (path, metrics[metric], metric)
  if cell.ex_by_verifier and "exact" in out and out["exact"][1]["unknowns"] == 0:
    out.setdefault("ex", out["exact"])
  return out


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


def seeded(cell: Cell, seed: int) -> Cell:
  """The cell measured on the run of ``seed`` (:data:`SEEDS`): ``cell`` itself for seed 0."""
  if seed == 0:
    return cell
  return dataclasses.replace(cell, evaluations=tuple(
      dataclasses.replace(e, run=dataclasses.replace(e.run, name=f"{e.run.name}_seed{seed}"))
      for e in cell.evaluations))


def over_seeds(cell: Cell) -> dict | None:
  """``{"seeds": [...], "runs": [...], metric: (mean, sd)}`` in percent over the seeds of
  :data:`SEEDS` whose run is kept with every evaluation of the cell (the metrics all of them
  have), or None when fewer than two are."""
  done = []
  for seed in SEEDS:
    c = seeded(cell, seed)
    if all(runs.kept(e.run) and runs.find_result(e) is not None for e in c.evaluations):
      done.append((seed, c.evaluations[0].run.name, measured(c)))
  if len(done) < 2:
    return None
  names = [m for m in (*METRICS, "exact") if all(m in values for *_, values in done)]
  return {"seeds": [s for s, *_ in done], "runs": [r for _, r, _ in done],
          **{m: stats.mean_sd([values[m] for *_, values in done]) for m in names}}


def _gaps(ours: dict[str, float], paper: dict) -> str:
  return ", ".join(f"{m.upper()} {ours[m] - paper[m]:+.1f}" for m in METRICS
                   if paper.get(m) is not None and m in ours and abs(ours[m] - paper[m]) > 3)


def tables(selected: list[Cell], runs_dir: Path, intervals: bool = False) -> str:
  """Markdown: one table per paper table, ours beside the paper's, gaps over 3 points named;
  each rate with its 95% Wilson interval when ``intervals`` (results/README.md's tables), and
  below a cell's row the mean ± sd over :data:`SEEDS` where two or more seeds are done."""
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
      found = sources(cell) if intervals else {}
      state = runs.cell_state(cell, runs_dir, active)
      paper_values = " / ".join(_fmt(cell.paper.get(m)) for m in METRICS) if cell.paper else "–"
      run = cell.evaluations[0].run
      lines.append(f"| {cell.row} | `{cell.column}` | {run.name}{_model_size(run)} | "
                   + " | ".join(_rate(m, ours, found)
                                + (" (verifier)" if m == "ex" and ex_from_verifier(cell, ours)
                                   else "") for m in METRICS)
                   + (f" | {_rate('exact', ours, found)} (≤ {_fmt(ours.get('exact_upper'))})"
                      if exact else "")
                   + f" | {paper_values} | {_gaps(ours, cell.paper)} | {_short(state)} |")
      seeds = over_seeds(cell)
      if seeds:
        means = {m: seeds[m][0] for m in METRICS if m in seeds}
        lines.append(
            f"| {cell.row}, mean ± sd of seeds {', '.join(map(str, seeds['seeds']))} | "
            f"`{cell.column}` | {', '.join(seeds['runs'])} | "
            + " | ".join(_fmt_mean_sd(seeds.get(m)) for m in METRICS)
            + (f" | {_fmt_mean_sd(seeds.get('exact'))}" if exact else "")
            + f" | {paper_values} | {_gaps(means, cell.paper)} | {len(seeds['seeds'])} seeds |")
    parts.append("\n".join(lines))
  return "\n\n".join(parts) + "\n"


def _arch(row: str) -> str:
  return next((a for a in ("Tree-LSTM", "Bi-LSTM", "LSTM") if a in row), "")


def _is_arc(row: str) -> bool:
  """An ARC row: ``LSTM ARC``, ``ARC LSTM``, the ARC-A3T tables' ``LSTM arc``."""
  return re.search(r"\bARC\b|\barc$", row) is not None


def _protocol(cell: Cell) -> tuple:
  evaluation = cell.evaluations[0]
  return space_key(evaluation.space), evaluation.max_candidates, evaluation.first


ACROSS_ARCHITECTURES = ("Table 4",)
"""Tables whose rows compare ARC with a baseline of another architecture (the paper's Table 4: the
ARC LSTM against A3T on a CNN), so their pairs cross architectures."""


def paired_cells(all_cells: list[Cell]) -> list[tuple[Cell, Cell]]:
  """(ARC cell, baseline cell) for every other row of the same table, column and architecture
  (any architecture in :data:`ACROSS_ARCHITECTURES`) evaluated the same way (space, lexicon,
  examples): the one-candidate rows of Table 3 are on a smaller space than ARC's and are not
  paired."""
  order = list(dict.fromkeys(c.table for c in all_cells))
  same_kind = lambda arc, other: (arc.table in ACROSS_ARCHITECTURES  # noqa: E731
                                  or _arch(other.row) == _arch(arc.row))
  pairs = [(arc, other) for arc in all_cells if _is_arc(arc.row) for other in all_cells
           if other.table == arc.table and other.column == arc.column and not _is_arc(other.row)
           and same_kind(arc, other) and _protocol(other) == _protocol(arc)]
  return sorted(pairs, key=lambda pair: order.index(pair[0].table))  # stable: cells' order


def paired(all_cells: list[Cell]) -> list[dict]:
  """McNemar's exact test (:func:`arc_jax.stats.mcnemar`) of ARC against each baseline on each
  metric of :data:`PAIRED_METRICS` both cells measured, from the per-example tables beside their
  results files; ``missing`` names the side(s) without one instead."""
  out = []
  for arc, other in paired_cells(all_cells):
    mine, theirs = sources(arc), sources(other)
    for metric in PAIRED_METRICS:
      if metric not in mine or metric not in theirs:
        continue  # not both evaluated
      (arc_path, _, arc_column), (other_path, _, other_column) = mine[metric], theirs[metric]
      row = {"table": arc.table, "column": arc.column, "metric": metric, "arc": arc,
             "other": other, "arc_file": arc_path, "other_file": other_path,
             "verifier": arc_column == "exact" or other_column == "exact"}
      tables_ = [per_example.read(p) if per_example.has_table(p) else None
                 for p in (arc_path, other_path)]
      missing = [who for who, t, column in zip(("ARC", "the other"), tables_,
                                               (arc_column, other_column))
                 if t is None or column not in t]
      if missing:
        row["missing"] = missing
      else:
        first, second = tables_
        if first["id"] != second["id"]:
          raise ValueError(f"{arc_path} and {other_path} are not on the same examples.")
        row.update(stats.mcnemar(first[arc_column], second[other_column]))
      out.append(row)
  return out


def paired_markdown(tests: list[dict]) -> str:
  """The table "ARC against each baseline, paired" (:func:`paired`)."""
  lines = ["### ARC against each baseline, paired", "", textwrap.fill(
      "McNemar's exact test on the same test examples, from the per-example tables "
      "(`*.examples.tsv.gz`) beside the results files named: b counts the examples ARC "
      "certifies (CF) or is robust on (EX) and the other model not, c the reverse, and p is the "
      "two-sided exact p-value (`arc_jax.stats.mcnemar`). Every pair of the tables above where "
      "both cells are measured is listed; where a results file has no per-example table yet, "
      "the row says so.", 99), "",
           "| table | space | metric | ARC: results file | against | its results file | "
           "b (only ARC) | c (only the other) | McNemar p |", "|" + "---|" * 9]
  name = lambda path: f"`{path.relative_to(runs.RESULTS)}`"  # noqa: E731
  for t in tests:
    metric = t["metric"].upper() + (" (exact verifier)" if t["verifier"] else "")
    if "missing" in t:
      numbers = ("no per-example table (" + " and ".join(
          "ARC's" if who == "ARC" else "the other's" for who in t["missing"]) + ")", "–", "–")
    else:
      numbers = (str(t["only_first"]), str(t["only_second"]), stats.format_p(t["p_value"]))
    lines.append(f"| {t['table']} | `{t['column']}` | {metric} | {name(t['arc_file'])} | "
                 f"{t['other'].row} | {name(t['other_file'])} | " + " | ".join(numbers) + " |")
  return "\n".join(lines) + "\n"


def arc_a3t_series(all_cells: list[Cell], first: str) -> dict[str, dict[int, dict[str, float]]]:
  """Row (method) → δ → :func:`measured` of the ARC-A3T cells on ``[(first,δ),(Sub,δ)]``, in any
  order of the spec: δ = 2 is the ARC-A3T table's column (``[(Sub,2),(Ins,2)]``), δ = 1 and 3
  the figures' cells."""
  series: dict[str, dict[int, dict[str, float]]] = {}
  for cell in (c for c in all_cells if c.table in ("ARC-A3T table", "ARC-A3T figures")):
    match = re.fullmatch(rf"{first}(\d)Sub\1", space_key(cell.column))
    values = measured(cell) if match else None
    if values:
      series.setdefault(cell.row, {})[int(match.group(1))] = values
  return series


WALL_TIME_TABLES = ("Table 2", "Table 3", "Table 4")
"""The tables whose cells' evaluation wall times :func:`wall_times_markdown` lists."""


def _seconds(metric: dict | None) -> str:
  """``52 s``, with EX's enumerated examples: ``52 s (1,288)``; ``–`` if not measured."""
  if metric is None or "seconds" not in metric:
    return "–"
  enumerated = f" ({metric['enumerated']:,})" if "enumerated" in metric else ""
  return f"{metric['seconds']:,.1f} s{enumerated}"


def wall_times_markdown(selected: list[Cell]) -> str:
  """The table "Evaluation wall times": the ``seconds`` each metric of a done cell of
  :data:`WALL_TIME_TABLES` took, as the results file :func:`sources` reads records them."""
  lines = ["### Evaluation wall times", "", textwrap.fill(
      "The seconds each metric took, as its results file records them, on the 2-core CPU "
      "shared with other jobs unless *How they were made* says otherwise (so at most what the "
      "evaluation alone needs); a metric resumed from its progress file counts every part. In "
      "brackets, the examples EX enumerated: the correct ones the certificates left.", 99), "",
           "| table | row | space | run | Acc | CF | EX (enumerated) | HF |", "|" + "---|" * 8]
  for cell in (c for c in selected if c.table in WALL_TIME_TABLES):
    found = sources(cell)
    if found:
      lines.append(f"| {cell.table} | {cell.row} | `{cell.column}` | "
                   f"{cell.evaluations[0].run.name} | " + " | ".join(
          _seconds(found[m][1] if m in found else None) for m in ("acc", "cf", "ex", "hf"))
                   + " |")
  return "\n".join(lines) + "\n"


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
    series = arc_a3t_series(all_cells, first)
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
  none_yet = "" if any(over_seeds(c) for c in selected) else " (none yet: one seed per cell)"
  note = textwrap.fill(INTERVALS_NOTE.format(none_yet=none_yet), 99)
  block = (f"{GENERATED_BEGIN}\n{note}\n\n"
           f"{tables(selected, runs_dir, intervals=True)}\n"
           f"{paired_markdown(paired(selected))}\n{wall_times_markdown(selected)}\n"
           f"{figure_list(list(figure_paths))}"
           f"{GENERATED_END}")
  if GENERATED_BEGIN in text and GENERATED_END in text:
    head, rest = text.split(GENERATED_BEGIN, 1)
    text = head + block + rest.split(GENERATED_END, 1)[1]
  else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
  readme.write_text(text)
