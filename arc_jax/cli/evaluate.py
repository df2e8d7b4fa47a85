"""Evaluates a trained run: ``arc-evaluate`` or ``python experiments/evaluate.py`` --workdir RUN
[--space SPEC] [--split test] [--metrics acc,cf,ex,hf,exact] [--beam 5] [--first N] [--no-shortcut]
[--checkpoint best|latest] [--domain NAME [--domain-setting FIELD=VALUE ...]] [--plugins MODULES]
[--output FILE] [--multihost ...].

Prints the results JSON and writes it to
RUN/eval/<split>[_first<N>]_<space>[_<domain>][_<metrics>][_audit].json (metrics named when fewer
than the model's, the domain when not the default interval domain; and to --output). CF (and exact)
certify in the abstract domain --domain (arc_jax.domains; --help lists them with their settings).
Exits with status 1 if CF ≤ EX ≤ HF ≤ Acc fails (per example, over the metrics computed) or, with
--no-shortcut, if a certified example has a misclassified member (an audit failure); with status 2
and one line naming the fix if a setting does not fit the run (an unknown --domain or
--domain-setting, naming the valid ones, or a Tree-LSTM with a domain other than interval; the run
directory and its checkpoint are checked before any data is loaded; a damaged latest checkpoint
gives way to the one before) or the results cannot be written; with 130 (143) and one line on
Ctrl-C (SIGTERM), writing no results. The exhaustive search (ex) keeps the examples it has decided
in RUN/eval/<results name>.progress.jsonl as it goes, and the complete verifier (exact) its
verdicts in RUN/eval/<results name>.exact.progress.jsonl, so the same command resumes them after a
stop (--no-resume neither reads nor writes them).
See arc_jax.evaluation and experiments/README.md.
"""

import argparse
import importlib
import json
import sys

from arc_jax import domains
from arc_jax.cli import common

# The names of arc_jax.metrics.METRICS written out (tests/cli checks them): --help starts no JAX.
METRICS_HELP = "comma-separated subset of acc,cf,ex,hf,exact (default: the model's, all but exact)"
# arc_jax.verify.WINDOW_RULES and DEFAULT_WINDOW_RULE, written out for the same reason.
WINDOW_RULES, DEFAULT_WINDOW_RULE = ("first", "last", "balanced"), "first"


def domains_help() -> str:
  """The registered domains (:data:`arc_jax.domains.DOMAINS`), one line each with its help, and
  under each its settings (``FIELD=DEFAULT  help``): the epilog of ``--help``."""
  width = max(map(len, domains.DOMAINS), default=0) + 2
  lines = ["domains (--domain NAME; settings: --domain-setting FIELD=VALUE):"]
  for name, entry in domains.DOMAINS.items():
    lines.append(f"  {name:<{width}}{entry.help}")
    for field, setting in (entry.settings.fields.items() if entry.settings else ()):
      lines.append(f"      {field}={setting.default}  {setting.help}")
  return "\n".join(lines)


def domain_settings(assignments) -> dict[str, str | None]:
  """``--domain-setting`` values (``FIELD=VALUE``, or ``FIELD`` alone for a boolean) as
  field → text (None for a bare field); the last of a field wins."""
  fields = {}
  for assignment in assignments or ():
    field, equals, value = assignment.partition("=")
    fields[field.strip()] = value if equals else None
  return fields


def parse_args(argv=None) -> argparse.Namespace:
  parser = common.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=domains_help(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--workdir", required=True, help="the run directory")
  parser.add_argument("--space", help="perturbation space spec (default: the run's space)")
  parser.add_argument("--split", default="test", choices=("train", "validation", "test"))
  parser.add_argument("--metrics", help=METRICS_HELP)
  parser.add_argument("--shortcut", action=argparse.BooleanOptionalAction, default=True,
                      help="count certified examples as robust without enumerating them "
                      "(--no-shortcut enumerates and audits them)")
  parser.add_argument("--checkpoint", default="best", choices=("best", "latest"))
  parser.add_argument("--synonyms", choices=("counterfitted", "ppdb"),
                      help="override the run's synonym lexicon")
  parser.add_argument("--max-candidates", type=int,
                      help="override the run's candidates per word (0: all)")
  parser.add_argument("--exhaustive-batch-size", type=int, default=256)
  parser.add_argument("--beam", type=int, default=5,
                      help="HotFlip beam width of hf: candidates per example (default 5)")
  parser.add_argument("--exact-max-nodes", type=int, default=4096,
                      help="exact: sub-spaces certified per example before it is unknown")
  parser.add_argument("--exact-window-rule", choices=WINDOW_RULES, default=DEFAULT_WINDOW_RULE,
                      help="exact: where the search splits an uncertified sub-space (default "
                      f"{DEFAULT_WINDOW_RULE}; results made before it was recorded used last)")
  parser.add_argument("--domain", default=domains.DEFAULT, metavar="NAME",
                      help="the abstract domain CF and exact certify in (default "
                      f"{domains.DEFAULT}; the registered domains are listed below)")
  parser.add_argument("--domain-setting", action="append", metavar="FIELD=VALUE",
                      help="a setting of --domain (repeatable; listed below under the domain)")
  parser.add_argument("--plugins", metavar="MODULES", default="",
                      help="comma-separated Python modules imported first, e.g. one that "
                      "registers a domain (arc_jax.domains.register_domain); the run's "
                      "config.plugins are imported too")
  parser.add_argument("--first", type=int, metavar="N",
                      help="evaluate the first N examples of the split only (recorded in the "
                      "results and their file name)")
  parser.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                      help="keep the decided examples of the exhaustive search (ex) and the "
                      "verifier (exact) in progress files next to the results and resume a "
                      "stopped search from them (--no-resume: neither read nor write them)")
  parser.add_argument("--output", help="also write the results JSON here")
  parser.add_argument("--no-progress", action="store_true", help="no progress bars")
  common.add_multihost_arguments(parser)
  return parser.parse_args(argv)


def import_plugins(names: str) -> None:
  """Imports each module of ``--plugins`` (comma-separated).

  Raises:
    ImportError: naming the module and the fix.
  """
  for name in filter(None, (n.strip() for n in names.split(","))):
    try:
      importlib.import_module(name)
    except ImportError as error:
      raise ImportError(f"--plugins: cannot import {name!r} ({error}); install it or put its "
                        "folder on PYTHONPATH.") from None


def main(argv=None) -> int:
  # --plugins first, so that --help lists the domains they register and --domain finds them.
  early = argparse.ArgumentParser(add_help=False)
  early.add_argument("--plugins", default="")
  try:
    import_plugins(early.parse_known_args(argv)[0].plugins)
  except ImportError as error:
    return common.error(error)
  args = parse_args(argv)
  common.start_jax(args)
  # pylint: disable=import-outside-toplevel  (JAX starts only when there is work: --help is fast)
  import jax
  from arc_jax.evaluation import (EvaluationError, evaluate_run, results_path, without_table,
                                  write_results)
  from arc_jax.train.interrupt import exit_on_signals
  try:
    with exit_on_signals("stopped; no results were written" + (
        "; ex and exact resume from their progress files when the same command runs again."
        if args.resume else ".")):
      results, status = evaluate_run(
          args.workdir, space=args.space, split=args.split,
          metrics=args.metrics.split(",") if args.metrics else None, shortcut=args.shortcut,
          checkpoint=args.checkpoint, synonyms=args.synonyms,
          max_candidates=args.max_candidates, exhaustive_batch_size=args.exhaustive_batch_size,
          beam=args.beam, first=args.first, exact_max_nodes=args.exact_max_nodes,
          exact_window_rule=args.exact_window_rule,
          resume=args.resume, domain=args.domain,
          domain_settings=domain_settings(args.domain_setting),
          progress=not args.no_progress and jax.process_index() == 0), 0
  except EvaluationError as error:
    print(error, file=sys.stderr)
    results, status = error.results, 1
  except common.user_errors() as error:
    return common.error(error)
  if jax.process_index() > 0:
    return status
  print(json.dumps(without_table(results), indent=2))  # first: a folder that cannot be written loses no numbers
  # --output first: written even where the run's eval/ cannot be.
  for path in filter(None, (args.output, results_path(args.workdir, results, args.shortcut))):
    try:
      write_results(results, path)
    except OSError as failure:
      return common.error(f"could not write the results printed above to {path} "
                          f"({failure.strerror}): make its folder writable, or pass --output FILE "
                          "in one that is.")
  return status


def run() -> None:
  """The ``arc-evaluate`` console script."""
  sys.exit(main())


if __name__ == "__main__":
  run()
