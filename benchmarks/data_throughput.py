"""Time to get the default LSTM experiment's data ready, from a cold and from a warm cache.

Builds SST-2 (train/validation/test), the vocabulary, the embedding matrix, the counter-fitted
synonyms and the DP plans of every batch (batch 32) of every split for ``[(Del,2),(Sub,2)]``:
once in a fresh cache folder (cold) and once more reusing it (warm). Each run is a fresh Python
process, so the times include interpreter start and imports. Prints one JSON line.

Usage: python benchmarks/data_throughput.py [--data-root DIR] [--spec SPEC] [--batch-size B]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = "[(Del,2),(Sub,2)]"


def run_once(cache_dir: str, data_root: str | None, spec: str, batch_size: int) -> dict:
  """Builds everything once; returns the stage times and sizes."""
  start = time.perf_counter()
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
  from arc_jax.data import iterate_batches, prepare_lstm_data
  from arc_jax.perturbation import PlanBuilder, data_space
  imported = time.perf_counter()
  data = prepare_lstm_data(data_root=data_root, cache_dir=cache_dir)
  prepared = time.perf_counter()
  builder = PlanBuilder(data_space(data, spec), data.vocab)
  batches = {}
  for name, split in data.splits.items():
    batches[name] = sum(1 for _ in iterate_batches(
        split.tokens, split.labels, data.vocab, batch_size, shuffle=name == "train",
        plan_builder=builder))
  done = time.perf_counter()
  test = data.stats["splits"]["test"]
  return {
      "import_s": round(imported - start, 2),
      "data_vocab_embeddings_synonyms_s": round(prepared - imported, 2),
      "plans_s": round(done - prepared, 2),
      "batches": batches,
      "vocab_size": data.stats["vocab_size"],
      "synonym_words": data.stats["synonyms"]["words"],
      "test_token_coverage": test["token_coverage"],
      "test_type_coverage": test["type_coverage"],
  }


def timed_child(args: argparse.Namespace, cache_dir: str) -> tuple[float, dict]:
  command = [sys.executable, __file__, "--child", cache_dir, "--spec", args.spec,
             "--batch-size", str(args.batch_size)]
  if args.data_root:
    command += ["--data-root", args.data_root]
  start = time.perf_counter()
  result = subprocess.run(command, capture_output=True, text=True)
  elapsed = time.perf_counter() - start
  if result.returncode:
    sys.exit(f"benchmark child failed:\n{result.stderr[-3000:]}")
  return elapsed, json.loads(result.stdout.strip().splitlines()[-1])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--data-root", default=None, help="data root (default: the search path)")
  parser.add_argument("--spec", default=SPEC, help="perturbation space of the plans")
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--child", metavar="CACHE_DIR", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    print(json.dumps(run_once(args.child, args.data_root, args.spec, args.batch_size)))
    return
  with tempfile.TemporaryDirectory(prefix="arc_jax_bench_") as cache_dir:
    cold_s, cold = timed_child(args, cache_dir)
    warm_s, warm = timed_child(args, cache_dir)
  print(json.dumps({
      "benchmark": "data_throughput", "spec": args.spec, "batch_size": args.batch_size,
      "cold_s": round(cold_s, 2), "warm_s": round(warm_s, 2),
      "cold_stages": {k: cold[k] for k in ("import_s", "data_vocab_embeddings_synonyms_s",
                                            "plans_s")},
      "warm_stages": {k: warm[k] for k in ("import_s", "data_vocab_embeddings_synonyms_s",
                                            "plans_s")},
      "batches": cold["batches"], "vocab_size": cold["vocab_size"],
      "synonym_words": cold["synonym_words"],
      "sst2_test_embedding_coverage": {"tokens": cold["test_token_coverage"],
                                       "types": cold["test_type_coverage"]},
  }))


if __name__ == "__main__":
  main()
