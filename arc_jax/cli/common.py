"""What the command lines share: user errors as one line with status 2, logging, several hosts."""

from __future__ import annotations

import logging
import os
import sys

import jax

from arc_jax.data import DataFileError, DataFileNotFoundError
from arc_jax.perturbation import SpecError
from arc_jax.train import ConfigError, RunExistsError, RunNotFoundError
from arc_jax.train.checkpoints import RunDamagedError, RunNotWritableError

USAGE_ERROR = 2
"""Exit status of a user error (a bad flag, config, run directory or data file), as argparse."""

USER_ERRORS = (ConfigError, SpecError, DataFileNotFoundError, DataFileError, RunExistsError,
               RunNotFoundError, RunDamagedError, RunNotWritableError)
"""Errors whose message names the problem and the fix: printed as one line, never a traceback."""

MULTIHOST_ENV = {"coordinator_address": "JAX_COORDINATOR_ADDRESS",
                 "num_processes": "JAX_NUM_PROCESSES", "process_id": "JAX_PROCESS_ID"}
"""Each setting of :func:`initialize_multihost` and the environment variable it defaults to."""

MULTIHOST_HELP = {
    "multihost": "run as one of several processes (one per host): call "
                 "jax.distributed.initialize first",
    "coordinator_address": "with --multihost: host:port of process 0 (default "
                           "$JAX_COORDINATOR_ADDRESS, or what the cluster, e.g. SLURM, says)",
    "num_processes": "with --multihost: number of processes (default $JAX_NUM_PROCESSES, or the "
                     "cluster's)",
    "process_id": "with --multihost: this process's index (default $JAX_PROCESS_ID, or the "
                  "cluster's)",
}


def error(message) -> int:
  """Prints ``error: <message>`` as one line to stderr; returns :data:`USAGE_ERROR`."""
  text = " ".join(str(message).split())
  print(f"error: {text}", file=sys.stderr)
  return USAGE_ERROR


def initialize_multihost(coordinator_address: str | None = None,
                         num_processes: int | None = None,
                         process_id: int | None = None) -> None:
  """``jax.distributed.initialize`` with the given settings, else their environment variables
  (:data:`MULTIHOST_ENV`), else JAX's cluster detection (SLURM, Open MPI, Cloud TPU, …)."""
  given = {"coordinator_address": coordinator_address, "num_processes": num_processes,
           "process_id": process_id}
  for name, variable in MULTIHOST_ENV.items():
    if given[name] is None and os.environ.get(variable):
      value = os.environ[variable]
      given[name] = value if name == "coordinator_address" else int(value)
  jax.distributed.initialize(**given)


def setup_logging() -> None:
  """INFO lines from process 0 only (the others log warnings and errors); absl's and JAX's INFO
  (Orbax logs every save) stay quiet."""
  # One plain console handler (absl's app.run installs its own), which the progress bars can
  # redirect (tqdm.contrib.logging) so that log lines do not tear them.
  handler = logging.StreamHandler()
  handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s",
                                         datefmt="%H:%M:%S"))
  logging.root.handlers = [handler]
  for noisy in ("absl", "jax"):
    logging.getLogger(noisy).setLevel(logging.WARNING)
  logging.root.setLevel(logging.INFO if jax.process_index() == 0 else logging.WARNING)
