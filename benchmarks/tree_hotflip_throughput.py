"""Throughput of tree HotFlip (HF Acc of a Tree-LSTM) on the SST test trees, one JSON line.

The 2,210 SST test trees with the tree configs' lexicon (PPDB, one candidate per word, standard
stop words), a Tree-LSTM with hidden 150 and fixed random weights, beam 5, ``batch_size`` trees
per gradient call (``batch_size · beam`` rows):

    python benchmarks/tree_hotflip_throughput.py [--space SPEC] [--beam 5] [--batch-size 32]
        [--limit N]

``seconds`` is the wall time of :func:`arc_jax.attacks.tree_hotflip_robustness` (compilation
included); ``trees_per_s`` divides the trees by it. HF Acc attacks only the correctly classified
trees (few for random weights on 5 classes), so the search is also timed on every tree
(:func:`arc_jax.attacks.tree_hotflip_search`), twice per padding: the first pass compiles what
was not compiled yet (``*_first_seconds``), the second is the steady state (``*_trees_per_s``).
Paddings, side by side: ``fixed``, every tree padded to one node count (the largest test tree
plus 2 per Dup budget, as training pads them: one compilation per rewrite kind and number of
schedule steps), and ``bucketed``, each gradient call padded to the node bucket of its largest
tree (``NODE_BUCKETS``; more compilations, less padding). ``speedup`` = fixed / bucketed steady
state time. The data preparation is timed apart (``prepare_s``).
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np
from flax import nnx

from arc_jax.attacks import tree_hotflip_robustness, tree_hotflip_search
from arc_jax.data import prepare_tree_data
from arc_jax.nn.tree_models import TreeLSTMClassifier, predict_tree
from arc_jax.padding import NODE_BUCKETS, bucket
from arc_jax.perturbation import data_space
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--space", default="[(Del,2),(Sub,2)]")
  parser.add_argument("--beam", type=int, default=5)
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--limit", type=int, help="only the first N test trees")
  args = parser.parse_args()

  start = time.perf_counter()
  data = prepare_tree_data(synonyms="ppdb", max_candidates=1)
  trees = data.splits["test"][:args.limit]
  space = tree_space(data_space(data, args.space))
  nodes = bucket(max(t.num_nodes for t in trees) + space.signature.added_nodes, NODE_BUCKETS)
  slots = max((len(c) for c in data.synonyms.values()), default=1)
  builders = {"fixed": (nodes,), "bucketed": tuple(n for n in NODE_BUCKETS if n <= nodes)}
  builders = {name: TreeBatchBuilder(data.vocab, space, min_substitutes=slots, node_buckets=b)
              for name, b in builders.items()}
  model = TreeLSTMClassifier(data.embeddings, hidden=150, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)

  def predict(batch):
    logits = np.asarray(predict_tree(graphdef, state, batch))
    return logits[np.arange(len(logits)), np.maximum(batch.num_nodes - 1, 0)]

  prepare_s = time.perf_counter() - start

  start = time.perf_counter()
  result = tree_hotflip_robustness(graphdef, state, space, trees, builders["fixed"], predict,
                                   beam=args.beam, batch_size=args.batch_size)
  seconds = time.perf_counter() - start
  summary = result.summary()
  line = {
      "benchmark": "tree_hotflip_sst_test", "space": args.space, "beam": args.beam,
      "batch_size": args.batch_size, "trees": len(trees), "node_count": nodes,
      "backend": jax.default_backend(), "seconds": round(seconds, 2),
      "trees_per_s": round(len(trees) / seconds, 1), "accuracy": round(summary["accuracy"], 4),
      "hotflip_accuracy": round(summary["hotflip_accuracy"], 4),
      "candidates_evaluated": summary["candidates_evaluated"]}
  steady = {}
  for name, builder in builders.items():
    passes = []
    for _ in range(2):
      start = time.perf_counter()
      tree_hotflip_search(graphdef, state, space, trees, builder, beam=args.beam,
                          batch_size=args.batch_size)
      passes.append(time.perf_counter() - start)
    steady[name] = passes[1]
    line.update({f"{name}_first_seconds": round(passes[0], 2),
                 f"{name}_seconds": round(passes[1], 2),
                 f"{name}_trees_per_s": round(len(trees) / passes[1], 1)})
  line["speedup"] = round(steady["fixed"] / steady["bucketed"], 2)
  line["prepare_s"] = round(prepare_s, 2)
  print(json.dumps(line))


if __name__ == "__main__":
  main()
