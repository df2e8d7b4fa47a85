"""Figures from the runs' JSON: ``python experiments/plots.py RUN [--output FILE.png]`` draws one
run's learning curves (RUN: a run directory or a results/ folder with ``metrics.jsonl``).

Learning curves: training loss per log interval, dev Acc and dev CF Acc per epoch (the selected
epoch marked), and the curriculum's λ and ε. ``robustness_vs_delta`` draws the δ figures
(metrics of one or more models on a family of spaces as δ grows). Matplotlib's Agg backend, PNG.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METRIC_LABELS = {"acc": "Acc", "hf": "HF Acc", "cf": "CF Acc", "ex": "EX Acc",
                 "exact": "exact Acc (verifier)"}


def read_metrics(path) -> tuple[list[dict], list[dict]]:
  """(train records, epoch records) of a ``metrics.jsonl``."""
  records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
  if not records:
    raise ValueError(f"{path} holds no records; train the run first (experiments/train.py).")
  return ([r for r in records if r["kind"] == "train"],
          [r for r in records if r["kind"] == "epoch"])


def learning_curves(metrics_path, output, title: str | None = None) -> Path:
  """Writes the learning curves of one run's ``metrics.jsonl`` to ``output`` (PNG)."""
  train, epochs = read_metrics(metrics_path)
  fig, (loss_ax, dev_ax, ramp_ax) = plt.subplots(1, 3, figsize=(13, 3.6))
  loss_ax.plot([r["step"] for r in train], [r["loss"] for r in train], lw=0.8)
  loss_ax.set(xlabel="step", ylabel="training loss", title="loss")
  epoch_ids = [r["epoch"] for r in epochs]
  for key, label in (("dev_acc", "dev Acc"), ("dev_cf_acc", "dev CF Acc")):
    if any(key in r for r in epochs):
      dev_ax.plot(epoch_ids, [100 * r.get(key, float("nan")) for r in epochs], marker=".",
                  label=label)
  if epochs:
    best = epochs[-1].get("best_epoch")
    if best is not None:
      dev_ax.axvline(best, color="grey", ls=":", label=f"selected epoch {best}")
  dev_ax.set(xlabel="epoch", ylabel="%", title="dev")
  dev_ax.legend(fontsize=8)
  for key, label in (("lambda", "λ"), ("eps", "ε")):
    ramp_ax.plot(epoch_ids, [r.get(key, float("nan")) for r in epochs], marker=".", label=label)
  ramp_ax.set(xlabel="epoch", title="curriculum")
  ramp_ax.legend(fontsize=8)
  fig.suptitle(title or Path(metrics_path).parent.name)
  fig.tight_layout()
  return _save(fig, output)


def line_label(series: str, metric: str, n_series: int, n_metrics: int) -> str:
  """A line's legend entry: the series (a model or method) unless it is the only one and the
  figure draws several metrics, then the metric unless it is the only one (the title names it)."""
  parts = [series] if n_series > 1 or n_metrics == 1 else []
  return " ".join(parts + ([METRIC_LABELS[metric]] if n_metrics > 1 else []))


def robustness_vs_delta(series: dict[str, dict[int, dict[str, float]]], metrics: Sequence[str],
                        output, title: str, sizes: dict[int, float] | None = None) -> Path:
  """Metric (percent) against δ, one line per (series, metric).

  Args:
    series: label → δ → metric name → value in percent (missing δs and metrics are skipped);
      ``<metric>_upper`` values, where every δ of a line has one, shade the band up to them.
    metrics: which metrics to draw (keys of ``METRIC_LABELS``).
    output: the PNG path.
    title: the figure title.
    sizes: δ → largest perturbation space size in the split, drawn on a log axis if given.
  """
  fig, ax = plt.subplots(figsize=(6, 4))
  for label, points in series.items():
    for metric in metrics:
      xs = sorted(d for d in points if metric in points[d])
      if xs:
        name = line_label(label, metric, len(series), len(metrics))
        line, = ax.plot(xs, [points[d][metric] for d in xs], marker="o", label=name)
        upper = f"{metric}_upper"  # the verifier's unknowns: the true value lies in the band
        if all(upper in points[d] for d in xs):
          ax.fill_between(xs, [points[d][metric] for d in xs], [points[d][upper] for d in xs],
                          color=line.get_color(), alpha=0.25)
  ax.set(xlabel="δ", ylabel="%", title=title)
  ax.set_xticks(sorted({d for points in series.values() for d in points}))
  if sizes:
    size_ax = ax.twinx()
    xs = sorted(sizes)
    size_ax.semilogy(xs, [sizes[d] for d in xs], color="black", ls="--", label="max |S(x)|")
    size_ax.set_ylabel("largest space size")
  ax.legend(fontsize=8)
  fig.tight_layout()
  return _save(fig, output)


def _save(fig, output) -> Path:
  output = Path(output)
  output.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(output, dpi=90)
  plt.close(fig)
  return output


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("run", type=Path, help="a run directory or results/ folder")
  parser.add_argument("--output", type=Path, help="PNG path (default RUN/learning_curves.png)")
  args = parser.parse_args(argv)
  metrics = args.run / "metrics.jsonl"
  if not metrics.exists():
    print(f"error: {metrics} not found: pass a run directory (experiments/train.py --workdir) "
          "or a results/ folder.", file=sys.stderr)
    return 2
  print(learning_curves(metrics, args.output or args.run / "learning_curves.png"))
  return 0


if __name__ == "__main__":
  sys.exit(main())
