"""HF Acc throughput of the HotFlip beam search, one JSON line.

SST-2 test (1,821 sentences, counter-fitted synonyms, standard stop words), hidden-100 LSTM with
fixed random weights, beam 5, ``batch_size`` sentences per gradient call:

    python benchmarks/hotflip_throughput.py [--space SPEC] [--beam 5] [--batch-size 32]
        [--model lstm|bilstm] [--limit N]

``seconds`` is the wall time of :func:`arc_jax.attacks.hotflip_robustness` (compilation
included: one per length bucket); ``sentences_per_s`` divides the sentences by it. HF Acc only
attacks correctly classified sentences (about half of them for random weights), so
``attack_all_seconds`` also times :func:`arc_jax.attacks.hotflip_search` on every sentence
(compiled already). The data preparation is timed apart (``prepare_s``).
"""

from __future__ import annotations

import argparse
import json
import time

from flax import nnx

from arc_jax.attacks import hotflip_robustness, hotflip_search
from arc_jax.data import prepare_lstm_data
from arc_jax.nn import LSTMClassifier
from arc_jax.perturbation import data_space


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--space", default="[(Del,2),(Sub,2)]")
  parser.add_argument("--beam", type=int, default=5)
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--model", choices=("lstm", "bilstm"), default="lstm")
  parser.add_argument("--limit", type=int, help="only the first N test sentences")
  args = parser.parse_args()

  start = time.perf_counter()
  data = prepare_lstm_data("sst2")
  test = data.splits["test"]
  sentences, labels = test.tokens[:args.limit], test.labels[:args.limit]
  space = data_space(data, args.space)
  model = LSTMClassifier(data.embeddings, hidden=100, bidirectional=args.model == "bilstm",
                         rngs=nnx.Rngs(0))
  prepare_s = time.perf_counter() - start

  start = time.perf_counter()
  result = hotflip_robustness(*nnx.split(model), space, sentences, labels, data.vocab,
                              beam=args.beam, batch_size=args.batch_size)
  seconds = time.perf_counter() - start
  start = time.perf_counter()
  hotflip_search(*nnx.split(model), space, sentences, labels, data.vocab, beam=args.beam,
                 batch_size=args.batch_size)
  attack_all_seconds = time.perf_counter() - start
  summary = result.summary()
  print(json.dumps({
      "benchmark": "hotflip_sst2_test", "model": args.model, "space": args.space,
      "beam": args.beam, "batch_size": args.batch_size, "sentences": len(sentences),
      "seconds": round(seconds, 2), "sentences_per_s": round(len(sentences) / seconds, 1),
      "accuracy": round(summary["accuracy"], 4),
      "hotflip_accuracy": round(summary["hotflip_accuracy"], 4),
      "candidates_evaluated": summary["candidates_evaluated"],
      "attack_all_seconds": round(attack_all_seconds, 2),
      "attack_all_sentences_per_s": round(len(sentences) / attack_all_seconds, 1),
      "prepare_s": round(prepare_s, 2)}))


if __name__ == "__main__":
  main()
