"""Certification throughput of the ARC DP, one JSON line per measurement.

SST-2 test (1,821 sentences, real tokens, counter-fitted synonyms, standard stop words, hidden
100, fixed random weights) for each space, batches of 32 (sorted by length bucket and reachable
grid where the code has ``certification_order``, else by length as the original's test loader
does); then 32 IMDB reviews of 500 tokens under [(Sub,2)] for memory.

    python benchmarks/certify_throughput.py [--model lstm|bilstm|tree] [--spaces SPEC ...]
        [--sentences N] [--workers W] [--baseline REV [--rounds R | --pairs P]]

``sentences_per_s`` times the jitted DP alone over all batches, ``workers`` of them at once as
``certify`` and ``evaluate.py`` run them (``arc_jax.parallel.concurrent_calls``): the best of
three passes after a first (compiling) one (the machines are shared and noisy), with the
median beside it;
``plan_s`` is the host time to lower the sentences (and fit the shape menu, as ``certify``
does); ``peak_memory_mib`` is the device's peak (the process's peak RSS on a CPU);
``compiled_shapes`` counts distinct (width, grid, word table) shapes.
``cpu_sentences_per_s`` divides by the process's CPU time (steadier on an overloaded machine).
``--baseline REV`` measures REV and this checkout side by side (benchmarks/revisions.py) and adds
one ``certify_compare`` line per space: the ratio of sentences/s, the load, and the certificates
compared sentence by sentence (``loosest_margin_change`` is the most any margin lower bound got
worse; ≥ 0 means every certificate is unchanged or tighter). ``--pairs P`` instead compiles both
revisions first and then alternates their timed passes (``revisions.interleaved``); the compare
line adds ``paired_ratio``, the median (and range) of the P per-pass ratios, which carry the
machine's drift over seconds instead of the minutes between two sequential runs.
The original's DP does 80 / 59 / 73 sentences/s for the three default spaces on this machine
(docs/ORIGINAL.md §9).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import resource
import sys
import tempfile
import time

import jax
import numpy as np
from flax import nnx

from arc_jax import certify as certify_lib
from arc_jax import interval
from arc_jax.certify import certify_jit
from arc_jax.data import (build_vocab_and_embeddings, candidate_words, find_data_file,
                          load_synonyms, prepare_lstm_data, restrict_synonyms, review_tokens)
from arc_jax.nn import LSTMClassifier
from arc_jax.perturbation import PlanBuilder, parse_space

try:
  from arc_jax.parallel import concurrent_calls, ordered_map
except ImportError:  # a baseline before concurrent batches: one call at a time
  concurrent_calls, ordered_map = (lambda: 1), (lambda fn, items, workers: map(fn, items))

try:
  from arc_jax.perturbation.shapes import MAX_DP_SHAPES
except ImportError:  # a baseline before bounded shapes: every batch on its exact grid
  MAX_DP_SHAPES = None

try:
  from arc_jax.perturbation import data_space
except ImportError:  # a baseline before f5c1543 (--baseline): the space was a method of the data
  data_space = lambda data, spec: data.space(spec)

import revisions

SPACES = ("[(Sub,2),(Del,2)]", "[(Sub,2),(Ins,2)]", "[(Del,2),(Ins,2)]")
ORIGINAL_SENTENCES_PER_S = {"[(Sub,2),(Del,2)]": 80, "[(Sub,2),(Ins,2)]": 59,
                            "[(Del,2),(Ins,2)]": 73}


def peak_rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_memory_mib() -> float:
  """The accelerator's peak bytes in use, or the process's peak RSS on a CPU."""
  stats = jax.devices()[0].memory_stats() or {}
  if "peak_bytes_in_use" in stats:
    return stats["peak_bytes_in_use"] / 2**20
  return peak_rss_mib()


def device() -> str:
  d = jax.devices()[0]
  return f"{d.platform}:{d.device_kind} x{jax.device_count()}"


def replacement_slots(synonyms) -> int:
  return max((len(c) for c in synonyms.values()), default=1)


def batches_of(builder, space, sentences, labels, batch_size):
  """(order, [(signature, plan, labels)]): reachable-grid batches where the code has them, on
  at most the library's default number of shapes where it bounds them (as ``certify`` runs)."""
  reachable = getattr(certify_lib, "certification_order", None)
  menu = () if MAX_DP_SHAPES is None else (builder.bound_shapes(sentences, MAX_DP_SHAPES),)
  if reachable is None:
    order = np.argsort([len(s) for s in sentences], kind="stable")
  else:
    order = reachable(builder, sentences)
  batches = []
  for i in range(0, len(order), batch_size):
    idx = order[i:i + batch_size]
    y = np.zeros((batch_size,), np.int32)
    y[:len(idx)] = labels[idx]
    plan = builder.build([sentences[j] for j in idx], batch_size=batch_size)
    sig = (space.signature if reachable is None
           else certify_lib.api.reachable_signature(space, plan, *menu))
    batches.append((sig, plan, y))
  return order, batches


def prepare_certification(model, space, sentences, labels, vocab, batch_size, slots, workers):
  """(plan_s, one_pass, shapes): the host time to lower the sentences, a function that certifies
  every batch once and returns (seconds, CPU seconds, margins (n, K) in input order), and the
  number of compiled shapes. ``workers`` batches run at once (``arc_jax.parallel.ordered_map``)."""
  builder = PlanBuilder(space, vocab, min_replacement_slots=slots)
  start = time.perf_counter()
  order, batches = batches_of(builder, space, sentences, labels, batch_size)
  plan_s = time.perf_counter() - start
  graphdef, state = nnx.split(model)

  def one_pass():
    start, cpu_start = time.perf_counter(), time.process_time()
    certs = list(ordered_map(lambda b: certify_jit(graphdef, b[0], state, b[1], b[2]), batches,
                             workers))
    jax.block_until_ready([c.certified for c in certs])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    margins = np.concatenate([np.asarray(c.margins) for c in certs])[:len(order)]
    in_order = np.empty_like(margins)
    in_order[order] = margins
    return seconds, cpu, in_order

  shapes = len({(plan.token_ids.shape, sig, getattr(plan, "distinct_words", None))
                for sig, plan, _ in batches})
  return plan_s, one_pass, shapes


def time_certification(model, space, sentences, labels, vocab, batch_size, slots, workers,
                       repeats=3):
  """Plan seconds, first (compiling) pass seconds, the later passes' seconds (sorted), their
  least CPU seconds, the margins (n, K) in input order and the number of compiled shapes."""
  plan_s, one_pass, shapes = prepare_certification(model, space, sentences, labels, vocab,
                                                   batch_size, slots, workers)
  passes = [one_pass() for _ in range(1 + repeats)]
  later = passes[1:]
  return (plan_s, passes[0][0], sorted(p[0] for p in later), min(p[1] for p in later),
          passes[-1][2], shapes)


def sst2_setup(model_kind: str, sentences: int | None):
  """(data, test tokens, labels, model, replacement slots) of the SST-2 measurements."""
  data = prepare_lstm_data("sst2")
  test = data.splits["test"]
  model = LSTMClassifier(data.embeddings, hidden=100, bidirectional=model_kind == "bilstm",
                         rngs=nnx.Rngs(0))
  return (data, test.tokens[:sentences], test.labels[:sentences], model,
          replacement_slots(data.synonyms))


def sst2_line(model_kind: str, spec: str, n: int, batch_size: int, workers: int,
              seconds: list[float], cpu_s: float, **measured) -> dict:
  """The JSON line of one space: the best and median of the timed passes' ``seconds``."""
  seconds = sorted(seconds)
  return {"benchmark": "certify_sst2_test", "model": model_kind, "space": spec,
          "sentences": n, "batch_size": batch_size, "workers": workers,
          "sentences_per_s": round(n / seconds[0], 1),
          "median_sentences_per_s": round(n / seconds[len(seconds) // 2], 1),
          "cpu_sentences_per_s": round(n / cpu_s, 1), "seconds": round(seconds[0], 3),
          **measured, "peak_memory_mib": round(peak_memory_mib()), "device": device(),
          "outward_rounding": hasattr(interval, "round_outward"),
          "load": revisions.load(),
          "original_sentences_per_s": ORIGINAL_SENTENCES_PER_S.get(spec),
          "speedup_vs_original": (round(n / seconds[0] / ORIGINAL_SENTENCES_PER_S[spec], 1)
                                  if spec in ORIGINAL_SENTENCES_PER_S else None)}


def sst2_lines(model_kind: str, specs, batch_size: int, sentences: int | None,
               margins_dir: pathlib.Path | None, workers: int):
  data, tokens, labels, model, slots = sst2_setup(model_kind, sentences)
  for spec in specs:
    plan_s, first_s, passes, cpu_s, margins, shapes = time_certification(
        model, data_space(data, spec), tokens, labels, data.vocab, batch_size, slots, workers)
    if margins_dir:
      np.save(margins_dir / f"{spec}.npy", margins)
    yield sst2_line(model_kind, spec, len(tokens), batch_size, workers, passes, cpu_s,
                    compile_s=round(first_s - passes[0], 2), plan_s=round(plan_s, 2),
                    compiled_shapes=shapes)


def serve(model_kind: str, specs, batch_size: int, sentences: int | None,
          margins_dir: pathlib.Path, workers: int) -> None:
  """The child of an interleaved run (``revisions.interleaved``): lowers and compiles every
  space (one untimed pass each, whose margins it saves), then certifies a space per line of
  stdin (``revisions.serve_passes``); when stdin closes, prints each space's line over its
  passes."""
  data, tokens, labels, model, slots = sst2_setup(model_kind, sentences)
  run, setup = {}, {}
  for spec in specs:
    plan_s, run[spec], shapes = prepare_certification(
        model, data_space(data, spec), tokens, labels, data.vocab, batch_size, slots, workers)
    first_s, _, margins = run[spec]()
    np.save(margins_dir / f"{spec}.npy", margins)
    setup[spec] = {"first_pass_s": round(first_s, 2), "plan_s": round(plan_s, 2),
                   "compiled_shapes": shapes}
  timed = revisions.serve_passes(lambda spec: run[spec]()[:2])
  for spec, passes in timed.items():
    print(json.dumps(sst2_line(model_kind, spec, len(tokens), batch_size, workers,
                               [p[0] for p in passes], min(p[1] for p in passes),
                               protocol="interleaved", **setup[spec])), flush=True)


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
  plan_s, first_s, passes, _, _, _ = time_certification(
      model, space, reviews, labels, emb.vocab, len(reviews), replacement_slots(synonyms), 1)
  steady_s = passes[0]
  return {"benchmark": "certify_imdb_long", "model": model_kind, "space": "[(Sub,2)]",
          "reviews": len(reviews), "tokens": 500, "seconds": round(steady_s, 3),
          "compile_s": round(first_s - steady_s, 2), "peak_rss_mib_before": round(rss_before),
          "peak_rss_mib": round(peak_rss_mib()), "device": device()}


def compare(lines: list[dict], baseline: str, margins_root: pathlib.Path,
            passes: list[dict] = ()) -> list[dict]:
  """One line per space: best sentences/s of each revision, their ratio, the certificates, and
  from interleaved ``passes`` the median, least and largest of the paired ratios."""
  out = []
  for spec in dict.fromkeys(l["space"] for l in lines if l["benchmark"] == "certify_sst2_test"):
    best = {(rev, key): max(l[key] for l in lines
                            if l.get("space") == spec and l["revision"] == rev
                            and l["benchmark"] == "certify_sst2_test")
            for rev in (baseline, "current") for key in ("sentences_per_s", "cpu_sentences_per_s")}
    old, new = (np.load(margins_root / rev / f"{spec}.npy") for rev in (baseline, "current"))
    certified = lambda m: np.all(m >= 0, axis=1) & np.any(m > 0, axis=1)
    line = {"benchmark": "certify_compare", "space": spec,
            **{f"{rev}_{key}": value for (rev, key), value in best.items()},
            "ratio": round(best["current", "sentences_per_s"]
                           / best[baseline, "sentences_per_s"], 2),
            "cpu_ratio": round(best["current", "cpu_sentences_per_s"]
                               / best[baseline, "cpu_sentences_per_s"], 2),
            "certified": [int(certified(old).sum()), int(certified(new).sum())],
            "lost_certificates": int((certified(old) & ~certified(new)).sum()),
            "loosest_margin_change": float((new - old).min()),
            "load": revisions.load()}
    line.update(revisions.paired_ratios([p for p in passes if p["item"] == spec], baseline))
    out.append(line)
  return out


def main(argv=None):
  argv = sys.argv[1:] if argv is None else argv
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model", choices=("lstm", "bilstm", "tree"), default="lstm")
  parser.add_argument("--spaces", nargs="+", default=list(SPACES))
  parser.add_argument("--batch-size", type=int, help="default 32 (trees: 64)")
  parser.add_argument("--sentences", type=int, help="the first N test sentences (default all)")
  parser.add_argument("--skip-imdb", action="store_true")
  parser.add_argument("--workers", type=int,
                      help="batches certified at once (default: arc_jax.parallel.concurrent_calls;"
                           " a baseline without it runs one at a time)")
  parser.add_argument("--baseline", help="a revision to measure side by side (e.g. 4046642)")
  parser.add_argument("--rounds", type=int, default=1, help="alternating runs per revision")
  parser.add_argument("--pairs", type=int,
                      help="with --baseline: both revisions compiled and kept alive, then this "
                           "many timed passes of each, alternating (revisions.interleaved)")
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--margins-dir", help=argparse.SUPPRESS)
  args, tree_args = parser.parse_known_args(argv)
  if args.model == "tree":
    # Tree options (--hidden, --width, --max-nodes) go to the tree benchmark.
    from tree_certify_throughput import main as tree_main  # pylint: disable=import-outside-toplevel
    if args.batch_size:
      tree_args += ["--batch-size", str(args.batch_size)]
    return tree_main(tree_args + ["--spaces", *args.spaces])
  if tree_args:
    parser.error(f"unrecognized arguments: {' '.join(tree_args)}")
  if args.baseline:
    with tempfile.TemporaryDirectory() as margins_root:
      child_argv = argv + ["--margins-dir", margins_root]
      if args.pairs:
        passes, lines = revisions.interleaved(__file__, child_argv, args.baseline, args.pairs,
                                              args.spaces)
      else:
        passes, lines = [], revisions.side_by_side(__file__, child_argv, args.baseline,
                                                   args.rounds)
      for line in ([{"benchmark": "certify_pass", **p} for p in passes] + lines
                   + compare(lines, args.baseline, pathlib.Path(margins_root), passes)):
        print(json.dumps(line), flush=True)
    return
  margins_dir = None
  if args.margins_dir:
    margins_dir = pathlib.Path(args.margins_dir) / os.environ.get("ARC_JAX_REVISION", "current")
    margins_dir.mkdir(parents=True, exist_ok=True)
  if args.serve:
    return serve(args.model, args.spaces, args.batch_size or 32, args.sentences, margins_dir,
                 args.workers or concurrent_calls())
  for line in sst2_lines(args.model, args.spaces, args.batch_size or 32, args.sentences,
                         margins_dir, args.workers or concurrent_calls()):
    print(json.dumps(line), flush=True)
  if not args.skip_imdb:
    print(json.dumps(imdb_line(args.model)), flush=True)


if __name__ == "__main__":
  sys.exit(main())
