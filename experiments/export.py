"""Keeps a finished run in the repository: ``python experiments/export.py --workdir RUN
[--to results/NAME]``; brings kept models up to date: ``python experiments/export.py --upgrade
results/NAME [...]``.

Writes the run's config (without its data folder), metrics log, summary, evaluation results,
best parameters and data (``model/``, the data in ``results/store/``, see arc_jax.train.export)
and its model card (``README.md``) to ``--to`` (default ``results/<run folder name>``), so that
``arc_jax.load_run("results/NAME")`` works with no data folder and ``experiments/evaluate.py
--workdir results/NAME`` without the Orbax checkpoints. Prints the model's size.

``--upgrade`` makes kept models of results/ self-contained: it prepares each one's data once from
the data folder, checks that it is the data the model was trained on, keeps it in the store,
checks that the store rebuilds the same embedding matrix bit for bit, drops ``data_dir`` from
``config.json`` and (re)writes the model card, whose metrics table then lists every results file
(run it again after new evaluations). The model card's training command is the run's config in
experiments/reproduce.py (``--config experiments/configs/FILE:ARG``) with an override for each
field that differs from it.

Exit status 2 with a one-line message if the run is unfinished, the destination already holds a
model (``--replace`` deletes the destination first), or a kept model does not match its data.
"""

import argparse
import functools
import importlib
import json
import logging
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # reproduce.py, beside this file

from arc_jax.data import DataFileError  # noqa: E402
from arc_jax.train import use_compilation_cache  # noqa: E402
from arc_jax.train.checkpoints import RunDirectory  # noqa: E402
from arc_jax.train.export import (  # noqa: E402
    MODEL_DIR, ExportError, keep_run_data, load_kept_data, portable_config, training_command,
    write_model_card)
from arc_jax.train.families import FAMILIES  # noqa: E402
from arc_jax.train.run import export_run  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"
MAX_KEPT_BYTES = 4 * 2**20
DATA_FIELDS = ("model", "dataset", "synonyms", "max_candidates", "data_dir")
"""The config fields that decide a run's data (two runs that agree on them share it)."""


@functools.cache
def shipped_configs() -> dict[str, str]:
  """Run name → the shipped config ``FILE:ARG`` that experiments/reproduce.py trains it with."""
  import reproduce  # pylint: disable=import-outside-toplevel  (imports the paper's tables)
  return {e.run.name: e.run.config for cell in reproduce.cells() for e in cell.evaluations}


def command(run_name: str, saved: dict) -> str:
  """The train.py command line that trained the config ``saved`` (a config.json) of the run
  ``run_name`` (its folder in results/, as experiments/reproduce.py names it)."""
  runs = shipped_configs()
  config_arg = runs.get(run_name, runs.get(saved.get("name")))
  if config_arg is None:
    return training_command(saved)
  file, _, arg = config_arg.partition(":")
  module = importlib.import_module(f"arc_jax.configs.{Path(file).stem}")
  base = module.get_config(arg) if arg else module.get_config()
  return training_command(saved, base, config_arg)


def model_bytes(dest: Path) -> int:
  return sum(f.stat().st_size for f in (dest / MODEL_DIR).iterdir())


def export(args) -> int:
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
    saved = json.loads((args.workdir / "config.json").read_text())
    record = export_run(args.workdir, dest, command(dest.name, saved))
  except (ExportError, FileNotFoundError) as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  size = model_bytes(dest)
  if size > MAX_KEPT_BYTES:
    print(f"warning: the kept model takes {size / 2**20:.1f} MiB, more than the "
          f"{MAX_KEPT_BYTES / 2**20:.0f} MiB a run in results/ may take (trained word vectors? "
          "see experiments/README.md, Keeping a run).", file=sys.stderr)
  print(json.dumps({"to": str(dest), "model_bytes": size, "exact": record["exact"],
                    "sparse": record["sparse"]}))
  return 0


def upgrade(run_dir: Path, prepared: dict) -> dict:
  """Keeps the data of the kept model ``run_dir`` (prepared once per :data:`DATA_FIELDS`, in
  ``prepared``), verifies it loads back, makes its config portable and writes its model card."""
  run = RunDirectory(run_dir)
  config = run.config()
  key = tuple(config[f] for f in DATA_FIELDS)
  if key not in prepared:
    prepared[key] = FAMILIES[config.model].lowering.prepare_data(config)
  kept = keep_run_data(run_dir, prepared[key])
  load_kept_data(run_dir)  # the store rebuilds the fingerprinted matrix, bit for bit
  saved = portable_config(json.loads(run.config_file.read_text()))
  run.config_file.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
  write_model_card(run_dir, command(run_dir.resolve().name, saved))
  return {"run": str(run_dir), "model_bytes": model_bytes(run_dir), "kept_data": kept}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  mode = parser.add_mutually_exclusive_group(required=True)
  mode.add_argument("--workdir", type=Path, help="a finished run directory")
  mode.add_argument("--upgrade", type=Path, nargs="+", metavar="KEPT",
                    help="kept models (results/NAME) to make self-contained (needs the data "
                    "folder once)")
  parser.add_argument("--to", type=Path, help="destination (default results/<run folder name>)")
  parser.add_argument("--replace", action="store_true",
                      help="first delete the destination's files (results of a model that was "
                      "not kept, e.g. runs committed before models were)")
  args = parser.parse_args(argv)
  use_compilation_cache()
  for noisy in ("absl", "jax"):
    logging.getLogger(noisy).setLevel(logging.WARNING)
  if args.workdir is not None:
    return export(args)
  prepared = {}
  for run_dir in args.upgrade:
    try:
      print(json.dumps(upgrade(run_dir, prepared)), flush=True)
    except (ExportError, DataFileError, FileNotFoundError) as error:
      print(f"error: {run_dir}: {error}", file=sys.stderr)
      return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
