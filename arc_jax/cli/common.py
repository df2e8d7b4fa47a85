"""What the command lines share: one flag style, user errors as one line with status 2, logging,
the compilation cache, several hosts.

Nothing here imports JAX at import time: a command's ``--help`` answers without starting it,
and :func:`start_jax` starts it when there is work.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

USAGE_ERROR = 2
"""Exit status of a user error (a bad flag, config, run directory or data file), as argparse."""

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


class ArgumentParser(argparse.ArgumentParser):
  """argparse with the one flag style of every command: long options spelled with dashes
  (``--exact-max-nodes``). The underscore spelling of an option (``--process_id``, as arc-train's
  absl flags were spelled) is accepted with a deprecation warning until the next release."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self._warned: set[str] = set()  # the deprecated spellings warned about, once each

  def parse_known_args(self, args=None, namespace=None):
    args = sys.argv[1:] if args is None else list(args)
    return super().parse_known_args([self._dashed(arg) for arg in args], namespace)

  def _dashed(self, arg: str) -> str:
    name, equals, value = arg.partition("=")
    dashed = "--" + name[2:].replace("_", "-")
    if not name.startswith("--") or dashed == name or dashed not in self._option_string_actions:
      return arg
    if name not in self._warned:
      self._warned.add(name)
      print(f"warning: {name} is deprecated; use {dashed} (the underscore spelling is accepted "
            "until the next release).", file=sys.stderr)
    return dashed + equals + value


def add_multihost_arguments(parser: argparse.ArgumentParser) -> None:
  """``--multihost`` and its settings (:func:`initialize_multihost`)."""
  parser.add_argument("--multihost", action="store_true", help=MULTIHOST_HELP["multihost"])
  parser.add_argument("--coordinator-address", metavar="HOST:PORT",
                      help=MULTIHOST_HELP["coordinator_address"])
  parser.add_argument("--num-processes", type=int, metavar="N",
                      help=MULTIHOST_HELP["num_processes"])
  parser.add_argument("--process-id", type=int, metavar="I", help=MULTIHOST_HELP["process_id"])


def user_errors() -> tuple[type[Exception], ...]:
  """Errors whose message names the problem and the fix: printed as one line, never a traceback
  (a bad config, space, data file or run directory)."""
  # pylint: disable=import-outside-toplevel  (their modules need JAX; --help does not)
  from arc_jax.data import DataFileError, DataFileNotFoundError
  from arc_jax.perturbation import SpecError
  from arc_jax.train import ConfigError, RunExistsError, RunNotFoundError
  from arc_jax.train.checkpoints import RunDamagedError, RunNotWritableError
  return (ConfigError, SpecError, DataFileNotFoundError, DataFileError, RunExistsError,
          RunNotFoundError, RunDamagedError, RunNotWritableError)


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
  import jax  # pylint: disable=import-outside-toplevel
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
  import jax  # pylint: disable=import-outside-toplevel
  # One plain console handler, which the progress bars can redirect (tqdm.contrib.logging) so
  # that log lines do not tear them.
  handler = logging.StreamHandler()
  handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s",
                                         datefmt="%H:%M:%S"))
  logging.root.handlers = [handler]
  for noisy in ("absl", "jax"):
    logging.getLogger(noisy).setLevel(logging.WARNING)
  logging.root.setLevel(logging.INFO if jax.process_index() == 0 else logging.WARNING)


def start_jax(args: argparse.Namespace | None = None) -> None:
  """Starts the work of a command: ``jax.distributed`` with ``args.multihost``
  (:func:`add_multihost_arguments`), logging, and the persistent compilation cache
  (:func:`arc_jax.train.use_compilation_cache`)."""
  from arc_jax.train import use_compilation_cache  # pylint: disable=import-outside-toplevel
  if args is not None and args.multihost:
    initialize_multihost(args.coordinator_address, args.num_processes, args.process_id)
  setup_logging()
  use_compilation_cache()
