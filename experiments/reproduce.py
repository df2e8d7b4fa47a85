"""Reproduces the paper's evaluation: ``python experiments/reproduce.py [--only PATTERN] [--list]
[--device-parallel N] [--gpu-runs] [--dp-shapes N] [--stop-after SECONDS] [--report-only]``.

Every number the paper reports is a *cell* here (:func:`cells`): a table, a row, a column, the
training run that makes its model, and the evaluations that measure it. ``--list`` shows each
cell's state: ``done`` (every results file exists), ``running`` (a process trains or evaluates
its run now) or ``missing`` (what is left, with an estimated time).

Without ``--list`` the driver works through the selected cells: it trains each missing run in
``--runs-dir`` (resuming an interrupted one), exports it into ``results/<run>/`` (the kept model,
arc_jax.train.export), evaluates the export (so the committed numbers are the kept model's), and
finally regenerates ``results/README.md``'s tables and the figures in ``results/figures/`` from
the JSON alone (``--report-only`` does just that). ARC runs and everything on IMDB are marked for
a GPU: they are trained only with ``--gpu-runs`` (or when JAX's backend is a GPU).
``--device-parallel N`` trains N runs at once (one accelerator holds several LSTM runs).

``--stash`` packs the selected runs left unfinished into ``results/unfinished/`` to be committed:
a session whose machine is not kept ends, and the next machine resumes them from there.

On a machine lent for a limited time, ``--stop-after SECONDS`` sends every training and
evaluation the driver started SIGTERM at that time (training saves a checkpoint, see
arc_jax.train.interrupt) and starts nothing after it: bring the runs folder back and run the
driver again anywhere to resume. ``--dp-shapes N`` trains new runs on at most N DP shapes
(``config.max_dp_shapes``; on a GPU each shape compiles for tens of seconds); a resumed run keeps
the value it started with, since the shapes decide which sentences share a batch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import runs  # noqa: E402
from paper import Cell, Evaluation, Run, cells  # noqa: E402, F401
from runs import (DeadlineReached, Limits, State, cell_state, find_result, kept,  # noqa: E402, F401
                  list_cells, process_run, run_cells, select, stash_unfinished)
from readme_tables import (GENERATED_BEGIN, GENERATED_END, figures, measured, tables,  # noqa: E402, F401
                    write_readme)

ROOT = runs.ROOT


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--only", help="cells whose id (see --list) contains this glob, or "
                      "whose run name matches it: 'table_2/lstm_*', 'del2ins2', 'normal_*'")
  parser.add_argument("--list", action="store_true", help="show every cell's state and exit")
  parser.add_argument("--device-parallel", type=int, default=1,
                      help="training runs at once (several fit on one GPU; default 1)")
  parser.add_argument("--gpu-runs", action="store_true",
                      help="also train the runs marked for a GPU (ARC, IMDB) on this machine")
  parser.add_argument("--dp-shapes", type=int, help="train new runs on at most this many DP "
                      "shapes (config.max_dp_shapes; 4 on a GPU, where each compiles for tens "
                      "of seconds)")
  parser.add_argument("--stop-after", type=float, metavar="SECONDS",
                      help="send the runs SIGTERM after this many seconds (they save a "
                      "checkpoint) and start nothing new: for a machine lent for a while")
  parser.add_argument("--stash", action="store_true",
                      help="pack the selected runs left unfinished in --runs-dir into "
                      "results/unfinished/ (to commit: another machine resumes them) and exit")
  parser.add_argument("--report-only", action="store_true",
                      help="only regenerate results/README.md's tables and the figures")
  parser.add_argument("--no-report", action="store_true",
                      help="do not regenerate the tables and figures at the end")
  parser.add_argument("--runs-dir", type=Path, default=Path(os.environ.get(
      "ARC_RUNS_DIR", ROOT / "runs")), help="where training runs live (default runs/, "
      "$ARC_RUNS_DIR)")
  args = parser.parse_args(argv)
  if args.device_parallel < 1:
    parser.error(f"--device-parallel {args.device_parallel}: pass at least 1.")
  if args.dp_shapes is not None and args.dp_shapes < 0:
    parser.error(f"--dp-shapes {args.dp_shapes}: pass 0 (exact grids) or more.")
  deadline = None if args.stop_after is None else time.monotonic() + args.stop_after
  all_cells = cells()
  selected = select(all_cells, args.only)
  if not selected:
    parser.error(f"--only {args.only!r} matches no cell; see --list for the cell ids.")
  if args.list:
    print(list_cells(selected, args.runs_dir))
    return 0
  if args.stash:
    print("\n".join(stash_unfinished(selected, args.runs_dir)) or "no unfinished run to stash")
    return 0
  if not args.report_only:  # a GPU machine trains the GPU runs (not asking JAX: it would
    run_cells(selected, args.runs_dir,  # take the GPU's memory)
              args.gpu_runs or shutil.which("nvidia-smi") is not None,
              Limits(args.device_parallel, deadline, args.dp_shapes))
  if args.no_report:
    return 0
  written = figures(all_cells)
  write_readme(all_cells, args.runs_dir, written)
  print(f"wrote results/README.md and {len(written)} figures in results/figures/")
  return 0


if __name__ == "__main__":
  sys.exit(main())
