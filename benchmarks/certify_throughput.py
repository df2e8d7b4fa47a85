"""Certification throughput of the ARC DP, one JSON line per measurement.

SST-2 test (1,821 sentences, real tokens, counter-fitted synonyms, standard stop words, hidden
100, fixed random weights) for each space, batches of 32 sorted by length as the original's test
loader does; then 32 IMDB reviews of 500 tokens under [(Sub,2)] for memory.

    python benchmarks/certify_throughput.py [--model lstm|bilstm|tree] [--spaces SPEC ...]

``sentences_per_s`` times the jitted DP alone over all batches: the best of three passes after a
first (compiling) one (the machines are shared and noisy), with the median beside it;
``plan_s`` is the host time to lower the sentences; ``peak_rss_mib`` is the process peak so far.
The original's DP does 80 / 59 / 73 sentences/s for the three default spaces on this machine
(DESIGN.md §9).
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import sys
import time

import jax
import numpy as np
from flax import nnx

from arc_jax.certify import certify_jit
from arc_jax.data import (build_vocab_and_embeddings, candidate_words, find_data_file,
                          load_synonyms, prepare_lstm_data, restrict_synonyms, review_tokens)
from arc_jax.nn import LSTMClassifier
from arc_jax.perturbation import PlanBuilder, parse_space

SPACES = ("[(Sub,2),(Del,2)]", "[(Sub,2),(Ins,2)]", "[(Del,2),(Ins,2)]")
ORIGINAL_SENTENCES_PER_S = {"[(Sub,2),(Del,2)]": 80, "[(Sub,2),(Ins,2)]": 59,
                            "[(Del,2),(Ins,2)]": 73}


def peak_rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def replacement_slots(synonyms) -> int:
  return max((len(c) for c in synonyms.values()), default=1)


def time_certification(model, space, sentences, labels, vocab, batch_size, slots, repeats=3):
  """Plan seconds, first (compiling) pass seconds and the later passes' seconds (sorted)."""
  order = np.argsort([len(s) for s in sentences], kind="stable")
  builder = PlanBuilder(space, vocab, min_replacement_slots=slots)
  start = time.perf_counter()
  batches = []
  for i in range(0, len(order), batch_size):
    idx = order[i:i + batch_size]
    y = np.zeros((batch_size,), np.int32)
    y[:len(idx)] = labels[idx]
    batches.append((builder.build([sentences[j] for j in idx], batch_size=batch_size), y))
  plan_s = time.perf_counter() - start
  graphdef, state = nnx.split(model)
  passes = []
  for _ in range(1 + repeats):
    start = time.perf_counter()
    certified = [certify_jit(graphdef, space.signature, state, plan, y).certified
                 for plan, y in batches]
    jax.block_until_ready(certified)
    passes.append(time.perf_counter() - start)
  return plan_s, passes[0], sorted(passes[1:])


def sst2_lines(model_kind: str, specs, batch_size: int):
  data = prepare_lstm_data("sst2")
  test = data.splits["test"]
  model = LSTMClassifier(data.embeddings, hidden=100, bidirectional=model_kind == "bilstm",
                         rngs=nnx.Rngs(0))
  slots = replacement_slots(data.synonyms)
  for spec in specs:
    space = data.space(spec)
    plan_s, first_s, passes = time_certification(model, space, test.tokens, test.labels,
                                                 data.vocab, batch_size, slots)
    n, steady_s = len(test.tokens), passes[0]
    yield {"benchmark": "certify_sst2_test", "model": model_kind, "space": spec,
           "sentences": n, "batch_size": batch_size, "sentences_per_s": round(n / steady_s, 1),
           "median_sentences_per_s": round(n / passes[len(passes) // 2], 1),
           "seconds": round(steady_s, 3), "compile_s": round(first_s - steady_s, 2),
           "plan_s": round(plan_s, 2), "peak_rss_mib": round(peak_rss_mib()),
           "original_sentences_per_s": ORIGINAL_SENTENCES_PER_S.get(spec),
           "speedup_vs_original": (round(n / steady_s / ORIGINAL_SENTENCES_PER_S[spec], 1)
                                   if spec in ORIGINAL_SENTENCES_PER_S else None)}


def long_reviews(count: int = 32, length: int = 500) -> list[tuple[str, ...]]:
  """The first ``count`` IMDB test reviews with at least ``length`` tokens, cut to ``length``."""
  reviews = []
  with gzip.open(find_data_file("imdb/test.jsonl.gz"), "rt", encoding="utf-8") as f:
    for line in f:
      tokens = review_tokens(json.loads(line)["text"])
      if len(tokens) >= length:
        reviews.append(tokens[:length])
        if len(reviews) == count:
          return reviews
  raise RuntimeError(f"fewer than {count} IMDB test reviews have {length} tokens")


def imdb_line(model_kind: str):
  reviews = long_reviews()
  lexicon = load_synonyms("counterfitted")
  emb = build_vocab_and_embeddings(candidate_words(lexicon, (w for r in reviews for w in r)))
  synonyms = restrict_synonyms(lexicon, emb.vocab)
  # Out-of-vocabulary tokens are dropped (the LSTM input policy), so pad back to 500 tokens
  # with in-vocabulary words to keep the measured length.
  filler = next(iter(emb.vocab))
  reviews = [tuple(w for w in r if w in emb.vocab) for r in reviews]
  reviews = [r + (filler,) * (500 - len(r)) for r in reviews]
  model = LSTMClassifier(emb.matrix, hidden=100, bidirectional=model_kind == "bilstm",
                         rngs=nnx.Rngs(0))
  space = parse_space("[(Sub,2)]", synonyms=synonyms).restricted_to(emb.vocab)
  labels = np.zeros((len(reviews),), np.int32)
  rss_before = peak_rss_mib()
  plan_s, first_s, passes = time_certification(model, space, reviews, labels, emb.vocab,
                                               len(reviews), replacement_slots(synonyms))
  steady_s = passes[0]
  return {"benchmark": "certify_imdb_long", "model": model_kind, "space": "[(Sub,2)]",
          "reviews": len(reviews), "tokens": 500, "seconds": round(steady_s, 3),
          "compile_s": round(first_s - steady_s, 2), "peak_rss_mib_before": round(rss_before),
          "peak_rss_mib": round(peak_rss_mib())}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model", choices=("lstm", "bilstm", "tree"), default="lstm")
  parser.add_argument("--spaces", nargs="+", default=list(SPACES))
  parser.add_argument("--batch-size", type=int, help="default 32 (trees: 64)")
  parser.add_argument("--skip-imdb", action="store_true")
  args, tree_args = parser.parse_known_args(argv)
  if args.model == "tree":
    # Tree options (--hidden, --width, --max-nodes) go to the tree benchmark.
    from tree_certify_throughput import main as tree_main  # pylint: disable=import-outside-toplevel
    if args.batch_size:
      tree_args += ["--batch-size", str(args.batch_size)]
    return tree_main(tree_args + ["--spaces", *args.spaces])
  if tree_args:
    parser.error(f"unrecognized arguments: {' '.join(tree_args)}")
  for line in sst2_lines(args.model, args.spaces, args.batch_size or 32):
    print(json.dumps(line), flush=True)
  if not args.skip_imdb:
    print(json.dumps(imdb_line(args.model)), flush=True)


if __name__ == "__main__":
  sys.exit(main())
