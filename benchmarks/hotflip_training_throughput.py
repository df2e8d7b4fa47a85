"""Throughput of HotFlip adversarial training's batch transform, one JSON line.

SST-2 train batches of ``batch_size`` sentences in the training order (seed 0, epoch 0), PPDB
synonyms with one candidate per word (the ``hotflip`` configs), the default hidden-100 LSTM with
fixed random weights, beam 1 (:func:`arc_jax.attacks.adversarial_examples`), the parameters
replicated on the data mesh of every device and each call split over it, as in training
(``--no-mesh``: plain arrays on the default device):

    python benchmarks/hotflip_training_throughput.py [--space SPEC] [--batch-size 32]
        [--model lstm|bilstm] [--batches 100] [--offset 0] [--no-mesh]

The first pass over the batches compiles (one compilation per length bucket; ``warmup_s``);
``seconds`` times a second pass over the same batches, and ``batches_per_s`` divides the
batches by it: the transform's cost per training step in the steady state. ``changed`` counts
the sentences whose adversarial string differs from the sentence.
"""

from __future__ import annotations

import argparse
import json
import time

from flax import nnx

from arc_jax import parallel
from arc_jax.attacks import adversarial_examples
from arc_jax.data import batch_order, prepare_lstm_data
from arc_jax.nn import LSTMClassifier
from arc_jax.perturbation import data_space


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--space", default="[(Del,2),(Sub,2)]")
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--model", choices=("lstm", "bilstm"), default="lstm")
  parser.add_argument("--batches", type=int, default=100)
  parser.add_argument("--offset", type=int, default=0, help="index of the first batch")
  parser.add_argument("--mesh", action=argparse.BooleanOptionalAction, default=True,
                      help="run the attack on the data mesh, as training does")
  args = parser.parse_args()

  start = time.perf_counter()
  data = prepare_lstm_data("sst2", synonyms="ppdb", max_candidates=1)
  train = data.splits["train"]
  space = data_space(data, args.space)
  model = LSTMClassifier(data.embeddings, hidden=100, projection=100, head_hidden=100,
                         bidirectional=args.model == "bilstm", rngs=nnx.Rngs(0))
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  mesh = parallel.data_mesh() if args.mesh else None
  if mesh is not None:
    params, rest = parallel.put((params, rest), parallel.replicated(mesh))
  order = batch_order([len(s) for s in train.tokens], args.batch_size)
  batches = [([train.tokens[i] for i in indices], train.labels[indices])
             for indices in order[args.offset:args.offset + args.batches]]
  prepare_s = time.perf_counter() - start

  def attack_all() -> list:
    return [adversarial_examples(graphdef, (params, rest), space, rows, labels, data.vocab,
                                 batch_size=args.batch_size, mesh=mesh) for rows, labels in batches]

  start = time.perf_counter()
  attack_all()
  warmup_s = time.perf_counter() - start
  start = time.perf_counter()
  found = attack_all()
  seconds = time.perf_counter() - start
  changed = sum(s != x for (rows, _), strings in zip(batches, found) for x, s in zip(rows, strings))
  print(json.dumps({
      "benchmark": "hotflip_training_transform_sst2_train", "model": args.model,
      "space": args.space, "beam": 1, "batch_size": args.batch_size, "batches": len(batches),
      "devices": 1 if mesh is None else mesh.size,
      "offset": args.offset, "seconds": round(seconds, 2),
      "batches_per_s": round(len(batches) / seconds, 2), "changed": changed,
      "warmup_s": round(warmup_s, 2), "prepare_s": round(prepare_s, 2)}))


if __name__ == "__main__":
  main()
