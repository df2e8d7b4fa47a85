"""Trains a classifier: ``arc-train`` or ``python experiments/train.py`` [--config FILE[:ARG]]
[--config.FIELD=VALUE ...] [--workdir DIR] [--overwrite] [--multihost ...].

Without flags it trains the default: an LSTM on SST-2 with ARC certified training for
``[(Del,2),(Sub,2)]`` (arc_jax/configs/arc.py) in runs/arc_lstm_del2sub2. Running it again
resumes an unfinished run; a finished one is kept unless ``--overwrite``. Ctrl-C (or SIGTERM)
saves a checkpoint and prints the command that resumes. ``--help`` lists every config field.
See experiments/README.md.
"""

from __future__ import annotations

import logging
import re
import shlex
import signal
import sys
from pathlib import Path

import jax
from absl import app, flags
from ml_collections import config_flags

from arc_jax import configs
from arc_jax.cli import common
from arc_jax.train import train_and_evaluate, use_compilation_cache
from arc_jax.train.config import FIELD_HELP, run_name
from arc_jax.train.interrupt import exit_on_signals

CONFIGS = Path(configs.__file__).resolve().parent
DEFAULT_CONFIG = CONFIGS / "arc.py"
FLAGS = flags.FLAGS
HELP_FLAGS = ("-h", "--help", "--helpshort", "--helpfull", "-?")

FLAG_HELP = {
    "config": "config file FILE[:ARG] (default arc_jax/configs/arc.py): a path, or the name of a "
              f"shipped config ({', '.join(sorted(p.name for p in CONFIGS.glob('[!_]*.py')))}), "
              "e.g. experiments/configs/arc.py:bilstm,sub2ins2",
    "workdir": "run directory (default runs/<run name>; the name follows the overrides)",
    "overwrite": "replace a finished run in --workdir",
    **common.MULTIHOST_HELP,
}


def _config_argument(argv: list[str]) -> tuple[int | None, str]:
  """(index in argv, value) of the --config flag, or (None, default)."""
  for i, arg in enumerate(argv):
    if arg.startswith("--config="):
      return i, arg.split("=", 1)[1]
    if arg == "--config" and i + 1 < len(argv):
      return i + 1, argv[i + 1]
  return None, str(DEFAULT_CONFIG)


def _resolve_config(argv: list[str]) -> list[str]:
  """argv with --config's file made a path: a shipped config's name becomes its path.

  Raises:
    FileNotFoundError: naming the file and the shipped configs.
  """
  index, value = _config_argument(argv)
  path, sep, arg = value.partition(":")
  if Path(path).is_file():
    return argv
  if (CONFIGS / path).is_file():
    argv = list(argv)
    resolved = f"{CONFIGS / path}{sep}{arg}"
    argv[index] = f"--config={resolved}" if argv[index].startswith("--config=") else resolved
    return argv
  shipped = ", ".join(sorted(p.name for p in CONFIGS.glob("[!_]*.py")))
  raise FileNotFoundError(f"Config file {path} not found; pass a path (e.g. "
                          f"experiments/configs/normal.py) or a shipped config: {shipped}.")


def _define_flags(argv: list[str]) -> None:
  """Defines the flags; the config flag reads the ``--config.FIELD`` overrides of ``argv``."""
  config_flags.DEFINE_config_file("config", str(DEFAULT_CONFIG), FLAG_HELP["config"],
                                  lock_config=True, sys_argv=argv)
  flags.DEFINE_string("workdir", None, FLAG_HELP["workdir"])
  flags.DEFINE_bool("overwrite", False, FLAG_HELP["overwrite"])
  flags.DEFINE_bool("multihost", False, FLAG_HELP["multihost"])
  flags.DEFINE_string("coordinator_address", None, FLAG_HELP["coordinator_address"])
  flags.DEFINE_integer("num_processes", None, FLAG_HELP["num_processes"])
  flags.DEFINE_integer("process_id", None, FLAG_HELP["process_id"])


def _flag_error(error: Exception) -> str:
  """One line for an error of flag or config parsing (config files raise with tracebacks)."""
  text = str(error)
  unknown = re.search(r'Did you mean "(\w+)" instead of "(\w+)"', text)
  if unknown:  # an unknown config field (ml_collections' message)
    return (f"config field {unknown[2]!r} does not exist; did you mean {unknown[1]!r}? "
            "(--help lists the fields)")
  if isinstance(error, (AttributeError, KeyError)):  # an unknown config field, no suggestion
    return f"config field {text.strip(chr(34))} does not exist (--help lists the fields)"
  lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
  if "Traceback" in text:  # the config file's get_config raised: keep its last line
    return f"{_config_argument(sys.argv)[1]}: {lines[-1]}"
  return lines[0] if lines else type(error).__name__


def help_text(config) -> str:
  """Usage, the flags, and every config field with its default and meaning."""
  lines = [__doc__.strip(), "", "flags:"]
  lines += [f"  --{name}: {text}" for name, text in FLAG_HELP.items()]
  lines += ["", f"config fields (--config.FIELD=VALUE; defaults of {_config_argument(sys.argv)[1]}"
            "):"]
  width = max(len(f"{k}={v}") for k, v in config.items()) + 4
  lines += [f"  {f'{k}={v}':<{width}}{FIELD_HELP.get(k, '')}" for k, v in config.items()]
  return "\n".join(lines)


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, with errors as one line (status 2) and a --help that lists the
  config fields (status 0)."""
  wants_help = any(arg in HELP_FLAGS for arg in argv[1:])
  argv = [arg for arg in argv if arg not in HELP_FLAGS]
  try:
    argv = _resolve_config(argv)
    _define_flags(argv)
    rest = FLAGS(argv)
  except (flags.Error, FileNotFoundError, AttributeError, KeyError, ValueError) as error:
    if wants_help:
      print(__doc__.strip())
      sys.exit(0)
    sys.exit(common.error(_flag_error(error)))
  if wants_help:
    print(help_text(FLAGS.config))
    sys.exit(0)
  if len(rest) > 1:
    sys.exit(common.error(f"unexpected arguments {rest[1:]}; set config fields with "
                          "--config.FIELD=VALUE (--help lists them)."))
  return rest


def resume_command(argv: list[str]) -> str:
  """The command line that resumes this run: the same one, without --overwrite (which would
  start it over)."""
  program = ["arc-train"] if Path(argv[0]).name == "arc-train" else ["python", argv[0]]
  return shlex.join(program + [a for a in argv[1:] if not a.startswith("--overwrite")])


def main(argv) -> int:
  del argv
  if FLAGS.multihost:
    common.initialize_multihost(FLAGS.coordinator_address, FLAGS.num_processes,
                                FLAGS.process_id)
  common.setup_logging()
  use_compilation_cache()
  config = FLAGS.config
  config.name = run_name(config, config_flags.get_override_values(FLAGS["config"]))
  workdir = FLAGS.workdir or str(Path("runs") / config.name)
  logging.info("JAX process %d of %d, %d devices (%s).", jax.process_index(),
               jax.process_count(), jax.device_count(), jax.devices()[0].platform)
  try:  # train_and_evaluate stops cleanly on signals once training starts
    with exit_on_signals("stopped while preparing or closing the run; the same command resumes "
                         "it from its last checkpoint."):
      summary = train_and_evaluate(config, workdir, overwrite=FLAGS.overwrite)
  except common.USER_ERRORS as error:
    return common.error(error)
  if summary["status"] == "interrupted":
    if jax.process_index() == 0:
      print(f"{summary['signal']}: stopped at step {summary['step']}, checkpoint saved in "
            f"{summary['workdir']}. Resume with: {resume_command(sys.argv)}", file=sys.stderr)
    return 128 + signal.Signals[summary["signal"]].value
  logging.info("Result: %s", summary)
  return 0


def run() -> None:
  """The ``arc-train`` console script."""
  app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
  run()
