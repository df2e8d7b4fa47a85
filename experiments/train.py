"""Trains a classifier: ``python experiments/train.py [--config FILE[:ARGS]] [--config.F=V]``.

Without flags it trains the default: an LSTM on SST-2 with ARC certified training for
``[(Del,2),(Sub,2)]`` (experiments/configs/arc.py) in runs/arc_lstm_del2sub2. Running it again
resumes an unfinished run; a finished one is kept unless ``--overwrite``. See
experiments/README.md.
"""

import logging
import sys
from pathlib import Path

import jax
from absl import app, flags
from ml_collections import config_flags

from arc_jax.data import DataFileNotFoundError
from arc_jax.perturbation import SpecError
from arc_jax.train import ConfigError, RunExistsError, train_and_evaluate, use_compilation_cache

CONFIGS = Path(__file__).resolve().parent / "configs"

_CONFIG = config_flags.DEFINE_config_file(
    "config", str(CONFIGS / "arc.py"), "Training config: a file of experiments/configs, "
    "optionally FILE:ARGS (e.g. experiments/configs/arc.py:bilstm,sub2ins2).", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (default runs/<config.name>).")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace a finished run in --workdir.")
_MULTIHOST = flags.DEFINE_bool("multihost", False,
                               "Call jax.distributed.initialize() first (one process per host).")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments {argv[1:]}; set config fields with "
                         "--config.FIELD=VALUE.")
  if _MULTIHOST.value:
    jax.distributed.initialize()
  for noisy in ("absl", "jax"):  # Orbax logs every save at INFO through absl
    logging.getLogger(noisy).setLevel(logging.WARNING)
  use_compilation_cache()
  config = _CONFIG.value
  workdir = _WORKDIR.value or str(Path("runs") / config.name)
  logging.info("JAX process %d of %d, %d devices.", jax.process_index(), jax.process_count(),
               jax.device_count())
  try:
    summary = train_and_evaluate(config, workdir, overwrite=_OVERWRITE.value)
  except RunExistsError as error:
    print(error, file=sys.stderr)
    return 1
  except (ConfigError, SpecError, DataFileNotFoundError) as error:  # the message names the fix
    print(f"error: {error}", file=sys.stderr)
    return 2
  logging.info("Result: %s", summary)
  return 0


if __name__ == "__main__":
  app.run(main)
