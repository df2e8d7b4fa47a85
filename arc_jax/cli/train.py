"""Trains a classifier: ``arc-train`` or ``python experiments/train.py`` [--config FILE[:ARG]]
[--config.FIELD=VALUE ...] [--workdir DIR] [--overwrite] [--multihost ...].

Without flags it trains the default: an LSTM on SST-2 with ARC certified training for
``[(Del,2),(Sub,2)]`` (arc_jax/configs/arc.py) in runs/arc_lstm_del2sub2. Running it again
resumes an unfinished run; a finished one is kept unless ``--overwrite``. Ctrl-C (or SIGTERM)
saves a checkpoint and prints the command that resumes. ``--help`` lists every config field.
See experiments/README.md.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import logging
import shlex
import signal
import sys
from pathlib import Path

import ml_collections

from arc_jax import configs, settings
from arc_jax.cli import common
from arc_jax.train import config as schema
from arc_jax.train.config import ConfigError, run_name

CONFIGS = Path(configs.__file__).resolve().parent
DEFAULT_CONFIG = CONFIGS / "arc.py"
OVERRIDE = "--config."
HELP_FLAGS = ("-h", "--help")


def shipped_configs() -> str:
  return ", ".join(sorted(p.name for p in CONFIGS.glob("[!_]*.py")))


def make_parser() -> common.ArgumentParser:
  parser = common.ArgumentParser(description=__doc__.strip(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--config", default=str(DEFAULT_CONFIG), metavar="FILE[:ARG]",
                      help="config file (default arc_jax/configs/arc.py): a path, or the name of "
                      f"a shipped config ({shipped_configs()}), e.g. "
                      "experiments/configs/arc.py:bilstm,sub2ins2")
  parser.add_argument("--workdir", metavar="DIR",
                      help="run directory (default runs/<run name>; the name follows the "
                      "overrides)")
  parser.add_argument("--overwrite", action="store_true",
                      help="replace a finished run in --workdir")
  common.add_multihost_arguments(parser)
  return parser


def split_overrides(argv: list[str]) -> tuple[dict[str, str | None], list[str]]:
  """(``--config.FIELD`` overrides as field → value text, None for a bare boolean one; the other
  arguments), in order; ``--config.FIELD VALUE`` takes the next argument as the value unless it
  is a flag."""
  overrides, rest, i = {}, [], 0
  while i < len(argv):
    arg = argv[i]
    if not arg.startswith(OVERRIDE):
      rest.append(arg)
    else:
      field, equals, value = arg[len(OVERRIDE):].partition("=")
      if not equals and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
        value, equals, i = argv[i + 1], "=", i + 1
      overrides[field] = value if equals else None
    i += 1
  return overrides, rest


def resolve_config(value: str) -> tuple[Path, str | None]:
  """(file, ARG or None) of ``--config FILE[:ARG]``; a shipped config's name is its file.

  Raises:
    FileNotFoundError: naming the file and the shipped configs.
  """
  path, sep, arg = value.partition(":")
  for candidate in (Path(path), CONFIGS / path):
    if candidate.is_file():
      return candidate, arg if sep else None
  raise FileNotFoundError(f"Config file {path} not found; pass a path (e.g. "
                          f"experiments/configs/normal.py) or a shipped config: "
                          f"{shipped_configs()}.")


def load_config(value: str) -> ml_collections.ConfigDict:
  """The config of ``--config FILE[:ARG]``: the file's ``get_config(ARG)`` (``get_config()``
  without ``:ARG``), locked, so that an override cannot add a field.

  Raises:
    FileNotFoundError: no such file.
    ConfigError: the file has no ``get_config`` or it raised (its message, one line).
  """
  path, arg = resolve_config(value)
  spec = importlib.util.spec_from_file_location(f"arc_config_{path.stem}", path)
  module = importlib.util.module_from_spec(spec)
  try:
    spec.loader.exec_module(module)
    config = module.get_config() if arg is None else module.get_config(arg)
  except Exception as failure:  # pylint: disable=broad-except  (the file's own code)
    raise ConfigError(f"{value}: {type(failure).__name__}: {failure}") from None
  if not isinstance(config, ml_collections.ConfigDict):
    raise ConfigError(f"{value}: get_config returned {type(config).__name__}, not an "
                      "ml_collections.ConfigDict.")
  legacy = sorted(set(config) & set(schema.LEGACY_FIELDS))
  if legacy:  # a config file of the flat layout
    print(f"warning: {value} sets {', '.join(legacy)}, now fields of settings blocks "
          f"({', '.join(f'{schema.LEGACY_FIELDS[f]}.{f}' for f in legacy)}); read as those.",
          file=sys.stderr)
    config = schema.with_defaults(config.to_dict())
  config.lock()
  return config


def _parse_value(config: ml_collections.ConfigDict, field: str, text: str | None):
  """``text`` as a value of ``field``'s type (``field`` may be ``block.field``)."""
  block, _, name = field.rpartition(".")
  owner = config[block] if block else config
  try:
    return settings.parse_value(OVERRIDE + field, owner.get_type(name), text, owner[name],
                                name=f"config field {field!r}")
  except ValueError as error:
    raise ConfigError(str(error)) from None


def _field_names(config: ml_collections.ConfigDict) -> list[str]:
  """Every field of ``config``, a block's as ``block.field``."""
  return list(schema.flat_items(config.to_dict()))


def _resolve(config: ml_collections.ConfigDict, field: str) -> str:
  """``field`` as the config names it: a flat field of the old layout becomes its block's
  (``pooling`` → ``lstm.pooling``, with a warning); an unknown one raises ConfigError naming the
  closest fields."""
  if field in schema.LEGACY_FIELDS:
    new = f"{schema.LEGACY_FIELDS[field]}.{field}"
    print(f"warning: {OVERRIDE}{field} is now {OVERRIDE}{new} (the old spelling is accepted "
          "until the next release).", file=sys.stderr)
    return new
  names = _field_names(config)
  if field in names:
    return field
  close = difflib.get_close_matches(field, names, n=3)
  hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
  raise ConfigError(f"config field {field!r} does not exist{hint} (--help lists the fields)")


def apply_overrides(config: ml_collections.ConfigDict, overrides: dict[str, str | None]
                    ) -> dict[str, str | None]:
  """Sets each field of ``overrides`` (:func:`split_overrides`) on ``config``, its text parsed as
  the field's type; ``plugins`` first, whose modules are then imported and their settings blocks
  added, so the other overrides may set them. Returns the overrides by their fields' names
  (``pooling`` → ``lstm.pooling``).

  Raises:
    ConfigError: one line naming an unknown field and the fields closest to it, or a value that
      is not of its field's type.
  """
  if "plugins" in overrides:
    config.plugins = _parse_value(config, "plugins", overrides["plugins"])
  schema.import_plugins(config)
  schema.add_blocks(config)
  resolved = {_resolve(config, field): text for field, text in overrides.items()}
  for field, text in resolved.items():
    block, _, name = field.rpartition(".")
    (config[block] if block else config)[name] = _parse_value(config, field, text)
  return resolved


def help_epilog(config: ml_collections.ConfigDict, source: str) -> str:
  """Every config field with its value and meaning: the shared fields (with the registered
  choices of those that name a registry entry), then each registered block's."""
  names = schema.choices()
  blocks = schema.registered_blocks()
  lines = [(f"{k}={v}", schema.FIELD_HELP.get(k, "") + (
      f"; one of: {', '.join(names[k])}" if k in names else ""))
           for k, v in config.items() if not isinstance(v, ml_collections.ConfigDict)]
  for name, block in blocks.items():
    lines += [(f"{name}.{f}={config[name][f]}", s.describe()) for f, s in block.fields.items()]
  width = max(len(left) for left, _ in lines) + 4
  return "\n".join([f"config fields ({OVERRIDE}FIELD=VALUE; values of {source}):"]
                   + [f"  {left:<{width}}{meaning}" for left, meaning in lines])


def parse_flags(argv: list[str]) -> tuple[argparse.Namespace, ml_collections.ConfigDict,
                                          set[str]]:
  """(flags, the config with its overrides applied, the overridden fields) of ``argv`` (without
  the program). Exits with status 2 and one line for a bad flag, config file or override, and
  with 0 after ``--help``, which lists the config fields of ``--config``."""
  overrides, rest = split_overrides(argv)
  parser = make_parser()
  known, _ = parser.parse_known_args([a for a in rest if a not in HELP_FLAGS])
  try:
    config = load_config(known.config)
    overrides = apply_overrides(config, overrides)
  except (FileNotFoundError, ConfigError) as failure:
    if any(arg in HELP_FLAGS for arg in rest):
      parser.print_help()
      sys.exit(0)
    sys.exit(common.error(failure))
  parser.epilog = help_epilog(config, known.config)
  args = parser.parse_args(rest)
  return args, config, set(overrides)


def resume_command(argv: list[str]) -> str:
  """The command line that resumes this run: the same one, without --overwrite (which would
  start it over)."""
  program = ["arc-train"] if Path(argv[0]).name == "arc-train" else ["python", argv[0]]
  return shlex.join(program + [a for a in argv[1:] if not a.startswith("--overwrite")])


def main(argv: list[str] | None = None) -> int:
  args, config, overridden = parse_flags(sys.argv[1:] if argv is None else argv)
  common.start_jax(args)
  # pylint: disable=import-outside-toplevel  (JAX starts only when there is work: --help is fast)
  import jax
  from arc_jax.train import train_and_evaluate
  from arc_jax.train.interrupt import exit_on_signals
  config.name = run_name(config, overridden)
  workdir = args.workdir or str(Path("runs") / config.name)
  logging.info("JAX process %d of %d, %d devices (%s).", jax.process_index(),
               jax.process_count(), jax.device_count(), jax.devices()[0].platform)
  try:  # train_and_evaluate stops cleanly on signals once training starts
    with exit_on_signals("stopped while preparing or closing the run; the same command resumes "
                         "it from its last checkpoint."):
      summary = train_and_evaluate(config, workdir, overwrite=args.overwrite)
  except common.user_errors() as failure:
    return common.error(failure)
  if summary["status"] == "interrupted":
    if jax.process_index() == 0:
      print(f"{summary['signal']}: stopped at step {summary['step']}, checkpoint saved in "
            f"{summary['workdir']}. Resume with: {resume_command(sys.argv)}", file=sys.stderr)
    return 128 + signal.Signals[summary["signal"]].value
  logging.info("Result: %s", summary)
  return 0


def run() -> None:
  """The ``arc-train`` console script."""
  sys.exit(main())


if __name__ == "__main__":
  run()
