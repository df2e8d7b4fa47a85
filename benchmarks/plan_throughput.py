"""Plan-building throughput on the SST-2 training set (issue 2).

Builds certification plans for all SST-2 training sentences under ``[(Del,2),(Sub,2)]`` (standard
stop words, counter-fitted synonyms) in batches of 32, and prints one JSON line with the seconds
spent building plans and the total including reading the data. Target: plan building < 20 s on
the 2-core CPU machine.

The data is read with plain Python (whitespace tokens, lower-cased), from the data folder
(``$ARC_DATA_DIR``, ``./data`` or a download folder, see arc_jax.data.paths). The vocabulary is every word of the
sentences plus their synonyms, so every token and every replacement has an id.

Usage: python benchmarks/plan_throughput.py [--limit N] [--batch-size 32] [--restrict] [--profile]
"""

import argparse
import cProfile
import gzip
import json
import pathlib
import pstats
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from arc_jax.data import paths  # noqa: E402
from arc_jax.perturbation import PlanBuilder, parse_space  # noqa: E402

TRAIN = "sst2/train.tsv.gz"
SYNONYMS = "synonyms/counterfitted_neighbors.json.gz"


def data_dir() -> pathlib.Path:
  """The data folder (arc_jax.data.paths: $ARC_DATA_DIR, ./data, a download folder)."""
  try:
    paths.find_data_file(TRAIN)
    return paths.find_data_file(SYNONYMS).parents[1]
  except paths.DataFileNotFoundError as missing:
    raise SystemExit(str(missing)) from None


def read_sentences(path: pathlib.Path) -> list[tuple[str, ...]]:
  with gzip.open(path, "rt", encoding="utf-8") as f:
    header = f.readline().rstrip("\n").split("\t")
    col = header.index("sentence")
    return [tuple(line.rstrip("\n").split("\t")[col].lower().split()) for line in f if line.strip()]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--space", default="[(Del,2),(Sub,2)]")
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--limit", type=int, default=None, help="use only the first N sentences")
  parser.add_argument("--restrict", action="store_true",
                      help="restrict the space to the vocabulary (a no-op here; measures its cost)")
  parser.add_argument("--profile", action="store_true", help="cProfile the plan building")
  args = parser.parse_args()

  start = time.perf_counter()
  root = data_dir()
  sentences = read_sentences(root / TRAIN)[:args.limit]
  with gzip.open(root / SYNONYMS, "rt", encoding="utf-8") as f:
    synonyms = json.load(f)
  words = {w for s in sentences for w in s}
  words |= {c for w in list(words) for c in synonyms.get(w, ())}
  vocab = {w: i + 1 for i, w in enumerate(sorted(words))}
  space = parse_space(args.space, synonyms=synonyms)
  if args.restrict:
    space = space.restricted_to(vocab)
  read_s = time.perf_counter() - start

  profiler = cProfile.Profile() if args.profile else None
  plan_start = time.perf_counter()
  if profiler:
    profiler.enable()
  builder = PlanBuilder(space, vocab)
  n_batches, shapes = 0, set()
  for i in range(0, len(sentences), args.batch_size):
    plan = builder.build(sentences[i:i + args.batch_size], batch_size=args.batch_size)
    n_batches += 1
    shapes.add(plan.shape)
  if profiler:
    profiler.disable()
  plan_s = time.perf_counter() - plan_start
  total_s = time.perf_counter() - start

  print(json.dumps({
      "benchmark": "plan_throughput",
      "space": str(space),
      "restricted": args.restrict,
      "sentences": len(sentences),
      "tokens": sum(len(s) for s in sentences),
      "batch_size": args.batch_size,
      "batches": n_batches,
      "distinct_shapes": len(shapes),
      "vocab_size": len(vocab),
      "plan_seconds": round(plan_s, 3),
      "sentences_per_second": round(len(sentences) / plan_s, 1),
      "read_seconds": round(read_s, 3),
      "total_seconds": round(total_s, 3),
      "target_plan_seconds": 20.0,
  }))
  if profiler:
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(20)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
  main()
