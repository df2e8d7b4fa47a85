"""Evaluates a trained run: ``python experiments/evaluate.py --workdir RUN [--space SPEC]
[--split test] [--metrics acc,cf,ex,hf,exact] [--beam 5] [--no-shortcut] [--checkpoint best|latest]
[--output FILE]``.

Writes the results JSON to RUN/eval/<split>_<space>[_<metrics>][_audit].json (metrics named when
fewer than the model's; and to --output) and prints it. Exits with status 1 if CF ≤ EX ≤ HF ≤
Acc fails (per example, over the metrics computed) or, with --no-shortcut, if a certified example
has a misclassified member (an audit failure); with status 2 and a message naming the fix if a
setting does not fit the run.
See arc_jax.evaluation and experiments/README.md.
"""

import argparse
import json
import logging
import sys

from arc_jax.data import DataFileNotFoundError
from arc_jax.evaluation import (METRICS, EvaluationError, evaluate_run, results_path,
                                write_results)
from arc_jax.perturbation import SpecError
from arc_jax.train import ConfigError, use_compilation_cache


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True, help="the run directory")
  parser.add_argument("--space", help="perturbation space spec (default: the run's space)")
  parser.add_argument("--split", default="test", choices=("train", "validation", "test"))
  parser.add_argument("--metrics",
                      help=f"comma-separated subset of {','.join(METRICS)} (default: all the "
                      "run's model supports; Tree-LSTMs: acc,cf,ex)")
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
  parser.add_argument("--output", help="also write the results JSON here")
  parser.add_argument("--no-progress", action="store_true", help="no tqdm bar")
  return parser.parse_args(argv)


def main(argv=None) -> int:
  args = parse_args(argv)
  use_compilation_cache()
  logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
  for noisy in ("absl", "jax"):  # Orbax logs every restore at INFO through absl
    logging.getLogger(noisy).setLevel(logging.WARNING)
  try:
    results, status = evaluate_run(
        args.workdir, space=args.space, split=args.split,
        metrics=args.metrics.split(",") if args.metrics else None, shortcut=args.shortcut,
        checkpoint=args.checkpoint, synonyms=args.synonyms,
        max_candidates=args.max_candidates, exhaustive_batch_size=args.exhaustive_batch_size,
        beam=args.beam, progress=not args.no_progress,
        exact_max_nodes=args.exact_max_nodes), 0
  except EvaluationError as error:
    print(error, file=sys.stderr)
    results, status = error.results, 1
  except (ConfigError, SpecError, DataFileNotFoundError) as error:  # the message names the fix
    print(f"error: {error}", file=sys.stderr)
    return 2
  paths = [results_path(args.workdir, results, args.shortcut)]
  paths += [args.output] if args.output else []
  for path in paths:
    write_results(results, path)
  print(json.dumps(results, indent=2))
  return status


if __name__ == "__main__":
  sys.exit(main())
