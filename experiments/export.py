"""Keeps a finished run in the repository: ``python experiments/export.py --workdir RUN
[--to results/NAME]``.

Writes the run's config, metrics log, summary, evaluation results and best parameters
(``model/``, see arc_jax.train.export) to ``--to`` (default ``results/<run folder name>``), so
that ``experiments/evaluate.py --workdir results/NAME`` works without the Orbax checkpoints.
Prints the model's size. Exit status 2 with a one-line message if the run is unfinished or the
destination already holds a model (``--replace`` deletes the destination first).
"""

import argparse
import json
import logging
import shutil
import sys
from pathlib import Path

from arc_jax.train import use_compilation_cache
from arc_jax.train.export import MODEL_DIR, ExportError
from arc_jax.train.run import export_run

RESULTS = Path(__file__).resolve().parents[1] / "results"
MAX_KEPT_BYTES = 4 * 2**20


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True, type=Path, help="a finished run directory")
  parser.add_argument("--to", type=Path, help="destination (default results/<run folder name>)")
  parser.add_argument("--replace", action="store_true",
                      help="first delete the destination's files (results of a model that was "
                      "not kept, e.g. runs committed before models were)")
  args = parser.parse_args(argv)
  use_compilation_cache()
  for noisy in ("absl", "jax"):
    logging.getLogger(noisy).setLevel(logging.WARNING)
  dest = args.to or RESULTS / args.workdir.resolve().name
  if not (args.workdir / "summary.json").exists():
    print(f"error: {args.workdir} has no summary.json: finish the run (experiments/train.py) "
          "before exporting it.", file=sys.stderr)
    return 2
  if dest.exists() and (dest / MODEL_DIR).exists() and not args.replace:
    print(f"error: {dest} already holds a kept model; pass --replace to replace it.",
          file=sys.stderr)
    return 2
  try:
    if args.replace and dest.exists():
      shutil.rmtree(dest)
    record = export_run(args.workdir, dest)
  except (ExportError, FileNotFoundError) as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  size = sum(f.stat().st_size for f in (dest / MODEL_DIR).iterdir())
  if size > MAX_KEPT_BYTES:
    print(f"warning: the kept model takes {size / 2**20:.1f} MiB, more than the "
          f"{MAX_KEPT_BYTES / 2**20:.0f} MiB a run in results/ may take (trained word vectors? "
          "see experiments/README.md, Keeping a run).", file=sys.stderr)
  print(json.dumps({"to": str(dest), "model_bytes": size, "exact": record["exact"],
                    "sparse": record["sparse"]}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
