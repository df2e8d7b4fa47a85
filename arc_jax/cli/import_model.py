"""Imports an outside LSTM classifier as a kept model: ``arc-import --from torch|flax|arc FILE
--vocab VOCAB --space SPEC [--synonyms ppdb|counterfitted|FILE.json] --out DIR``.

FILE: a PyTorch state dict (``.pt`` / ``.pth``, needs torch; or ``.npz``), Flax parameters
(``.msgpack`` or ``.npz``; NNX or Linen), or an original ARC ``lstm-dp`` checkpoint (``.pth``).
VOCAB: the word of embedding row i on line i, or a JSON ``{word: row}``. The folder DIR then
certifies with ``arc-certify --model DIR`` and loads with ``arc_jax.load_run(DIR)``, with no data
folder; its store files go to ``DIR/../store/`` (see arc_jax.importers).

Exit status 0; 2 with one line naming the problem and the fix (an unsupported layer or cell,
a missing parameter, a shape mismatch, a bad space or file).
"""

from __future__ import annotations

import argparse
import sys

from arc_jax.cli import common


def parse_args(argv=None) -> argparse.Namespace:
  parser = common.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("file", help="the model's parameters (.pt/.pth, .msgpack, .npz)")
  parser.add_argument("--from", dest="kind", required=True, choices=("torch", "flax", "arc"),
                      help="the framework of FILE (flax: NNX or Linen)")
  parser.add_argument("--vocab", required=True, help="word of row i on line i, or JSON {word: row}")
  parser.add_argument("--space", required=True, help="perturbation space spec, e.g. [(Del,2),(Sub,2)]")
  parser.add_argument("--out", required=True, help="the kept model folder to write")
  parser.add_argument("--pooling", default="final", choices=("final", "mean"),
                      help="how the model pools the LSTM states (default final)")
  parser.add_argument("--synonyms", default="none",
                      help="Sub's lexicon: none, ppdb, counterfitted (from the data folder) or a "
                           "JSON file {word: [candidates]}")
  parser.add_argument("--max-candidates", type=int, help="Sub candidates per word (default all)")
  parser.add_argument("--stopwords", help="Del's stop words, one a line (default: a and the of to)")
  parser.add_argument("--dataset", default="sst2", choices=("sst2", "imdb"),
                      help="the tokenization arc-certify applies to input lines (default sst2)")
  parser.add_argument("--linear-projection", action="store_true",
                      help="torch/flax: no ReLU after the projection layer")
  parser.add_argument("--embedding", help="torch: the nn.Embedding's name, if not clear")
  parser.add_argument("--cells", help="flax: FORWARD[,BACKWARD] paths of the LSTM cells")
  parser.add_argument("--projection", help="torch/flax: the projection layer's name, or none")
  parser.add_argument("--head", help="torch/flax: the head's layer names, NAME[,NAME]")
  return parser.parse_args(argv)


def _names(value: str | None):
  return None if value is None else tuple(value.split(","))


def main(argv=None) -> int:
  args = parse_args(argv)
  common.setup_logging()
  # pylint: disable=import-outside-toplevel  (JAX starts only when there is work: --help is fast)
  from arc_jax.importers import ImporterError, import_file
  layout = {"embedding": args.embedding, "cells": _names(args.cells),
            "projection": args.projection, "head": _names(args.head),
            "projection_relu": False if args.linear_projection else None}
  try:
    dest = import_file(args.kind, args.file, args.vocab, args.out, space=args.space,
                       pooling=args.pooling, dataset=args.dataset, synonyms=args.synonyms,
                       max_candidates=args.max_candidates, stopwords_path=args.stopwords,
                       **layout)
  except (*common.user_errors(), ImporterError, OSError, ValueError) as error:
    return common.error(error)
  print(f"wrote {dest}; certify with: arc-certify --model {dest} FILE")
  return 0


def run() -> None:
  """The ``arc-import`` console script."""
  sys.exit(main())


if __name__ == "__main__":
  run()
