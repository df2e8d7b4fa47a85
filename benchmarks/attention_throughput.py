"""Cost of certifying attention pooling against the final-state DP, one JSON line per space.

The same SST-2 test sentences (real tokens, counter-fitted synonyms, hidden 100, random weights,
batches of 32 sorted by length) certified by an LSTM / Bi-LSTM with ``pooling="final"`` and with
``pooling="attention"`` in the same process, and one ARC gradient step (the worst-case loss) per
batch for both; ratios beside the figures.

    python benchmarks/attention_throughput.py [--model lstm|bilstm] [--limit N] [--spaces ...]

``--save-inputs FILE`` writes the prepared sentences, vectors and lexicon (a pickle) and
``--inputs FILE`` reads them instead of the data root (for a machine without the data or TFDS).
Timings are the best of ``--repeats`` passes after a first (compiling) one, median beside them.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import sys
import time

import jax
import numpy as np
import optax
from flax import nnx

from arc_jax.certify import certify_jit, make_certify_fn
from arc_jax.nn import LSTMClassifier
from arc_jax.perturbation import PlanBuilder, parse_space
from arc_jax.padding import LENGTH_BUCKETS

SPACES = ("[(Sub,2),(Del,2)]", "[(Sub,2),(Ins,2)]", "[(Del,2),(Ins,2)]")


def prepared_inputs(path: str | None) -> dict:
  """SST-2 test sentences, labels, vectors, vocabulary, synonyms and stop words."""
  if path:
    with open(path, "rb") as f:
      return pickle.load(f)
  from arc_jax.data import prepare_lstm_data  # pylint: disable=import-outside-toplevel
  data = prepare_lstm_data("sst2")
  test = data.splits["test"]
  return {"tokens": list(test.tokens), "labels": np.asarray(test.labels),
          "embeddings": np.asarray(data.embeddings), "vocab": dict(data.vocab),
          "synonyms": dict(data.synonyms), "stopwords": data.stopwords}


def batches_of(space, inputs, tokens, labels, batch_size, buckets):
  order = np.argsort([len(s) for s in tokens], kind="stable")
  slots = max((len(c) for c in inputs["synonyms"].values()), default=1)
  builder = PlanBuilder(space, inputs["vocab"], buckets, min_replacement_slots=slots)
  out = []
  for i in range(0, len(order), batch_size):
    idx = order[i:i + batch_size]
    y = np.zeros((batch_size,), np.int32)
    y[:len(idx)] = labels[idx]
    out.append((builder.build([tokens[j] for j in idx], batch_size=batch_size), y))
  return out


def passes(fn, batches, repeats):
  """Seconds of a first (compiling) pass and of ``repeats`` more (sorted)."""
  times = []
  for _ in range(1 + repeats):
    start = time.perf_counter()
    jax.block_until_ready([fn(plan, y) for plan, y in batches])
    times.append(time.perf_counter() - start)
  return times[0], sorted(times[1:])


def measure(model, space, batches, repeats):
  graphdef, state = nnx.split(model)
  certify = lambda plan, y: certify_jit(graphdef, space.signature, state, plan, y).certified
  param_graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  certify_fn = make_certify_fn(param_graphdef, space)

  def loss(params, plan, y):
    cert = certify_fn((params, rest), plan, y, 1.0)
    return optax.softmax_cross_entropy_with_integer_labels(cert.worst_case_logits, y).mean()

  grad = jax.jit(jax.grad(loss))
  gradient = lambda plan, y: grad(params, plan, y)
  return {name: passes(fn, batches, repeats) for name, fn in (("certify", certify),
                                                              ("gradient", gradient))}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model", choices=("lstm", "bilstm"), default="lstm")
  parser.add_argument("--spaces", nargs="+", default=list(SPACES))
  parser.add_argument("--limit", type=int, default=0, help="first N test sentences (0: all)")
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--buckets", type=int, nargs="+", default=list(LENGTH_BUCKETS),
                      help="padded lengths (one bucket: one compilation per measurement)")
  parser.add_argument("--inputs", help="read the prepared inputs from this pickle")
  parser.add_argument("--save-inputs", help="write the prepared inputs to this pickle and stop")
  args = parser.parse_args(argv)
  inputs = prepared_inputs(args.inputs)
  if args.save_inputs:
    with open(args.save_inputs, "wb") as f:
      pickle.dump(inputs, f)
    return 0
  tokens, labels = inputs["tokens"], inputs["labels"]
  if args.limit:
    tokens, labels = tokens[:args.limit], labels[:args.limit]
  models = {pooling: LSTMClassifier(inputs["embeddings"], hidden=100, pooling=pooling,
                                    bidirectional=args.model == "bilstm", rngs=nnx.Rngs(0))
            for pooling in ("final", "attention")}
  for spec in args.spaces:
    space = parse_space(spec, synonyms=inputs["synonyms"], stopwords=inputs["stopwords"]
                        ).restricted_to(inputs["vocab"])
    batches = batches_of(space, inputs, tokens, labels, args.batch_size, args.buckets)
    timings = {p: measure(m, space, batches, args.repeats) for p, m in models.items()}
    line = {"benchmark": "attention_vs_final", "model": args.model, "space": spec,
            "sentences": len(tokens), "batch_size": args.batch_size,
            "buckets": len(args.buckets),
            "device": jax.devices()[0].device_kind}
    for what in ("certify", "gradient"):
      for pooling, t in timings.items():
        first, rest = t[what]
        line[f"{what}_{pooling}_s"] = round(rest[0], 3)
        line[f"{what}_{pooling}_median_s"] = round(rest[len(rest) // 2], 3)
        line[f"{what}_{pooling}_compile_s"] = round(first - rest[0], 2)
      line[f"{what}_attention_over_final"] = round(
          timings["attention"][what][1][0] / timings["final"][what][1][0], 2)
    line["certify_attention_sentences_per_s"] = round(
        len(tokens) / timings["attention"]["certify"][1][0], 1)
    line["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
  sys.exit(main())
