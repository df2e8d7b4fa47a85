"""Tree-LSTM certification throughput on the SST test trees, one JSON line per space.

The 2,210 SST test trees (counter-fitted synonyms, standard stop words), a Tree-LSTM with hidden
150 and fixed random weights (the DP's cost does not depend on them), batches sorted by node
count, every tree padded to 128 nodes so that only the number of scan steps varies (a few
programs). ``trees_per_s`` times the jitted DP over all batches after a first pass that compiles
one program per batch shape (``compile_s`` = first pass − second pass); ``build_s`` is the host
time to lower the trees (padding, Sub candidates, schedules); ``peak_rss_mib`` is the process
peak (``resource.getrusage``).

    python benchmarks/tree_certify_throughput.py [--spaces SPEC ...] [--batch-size B]
        [--hidden H] [--width W] [--max-nodes N]

``benchmarks/certify_throughput.py --model tree`` calls :func:`main`.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import jax
import numpy as np
from flax import nnx

from arc_jax.certify import certify_jit
from arc_jax.data import prepare_tree_data
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation import data_space
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space

SPACES = ("[(Del,2),(Sub,2)]",)


def peak_rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def certify_lines(specs, batch_size: int, hidden: int, width: int, max_nodes: int | None):
  data = prepare_tree_data()
  trees = data.splits["test"]
  model = TreeLSTMClassifier(data.embeddings, hidden=hidden, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  slots = max((len(c) for c in data.synonyms.values()), default=1)
  order = np.argsort([t.num_nodes for t in trees], kind="stable")
  for spec in specs:
    space = tree_space(data_space(data, spec))
    builder = TreeBatchBuilder(data.vocab, space, min_substitutes=slots, width=width)
    start = time.perf_counter()
    batches = [builder.build([trees[i] for i in order[s:s + batch_size]], batch_size,
                             max_nodes=max_nodes)
               for s in range(0, len(order), batch_size)]
    build_s = time.perf_counter() - start
    passes = []
    for _ in range(2):
      start = time.perf_counter()
      certified = [certify_jit(graphdef, space.signature, state, b, b.labels).certified
                   for b in batches]
      jax.block_until_ready(certified)
      passes.append(time.perf_counter() - start)
    shapes = sorted({(b.shape[1],) + b.schedule.shape for b in batches})
    yield {"benchmark": "certify_sst_trees_test", "model": "tree", "space": spec,
           "trees": len(trees), "batch_size": batch_size, "hidden": hidden,
           "trees_per_s": round(len(trees) / passes[1], 1), "seconds": round(passes[1], 3),
           "compile_s": round(passes[0] - passes[1], 2), "build_s": round(build_s, 2),
           "programs": len(shapes), "shapes_nodes_steps_width": shapes,
           "certified": int(sum(np.sum(c) for c in certified)),
           "peak_rss_mib": round(peak_rss_mib())}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--spaces", nargs="+", default=list(SPACES))
  parser.add_argument("--batch-size", type=int, default=64)
  parser.add_argument("--hidden", type=int, default=150)
  parser.add_argument("--width", type=int, default=32, help="nodes per scan step")
  parser.add_argument("--max-nodes", type=int, default=128,
                      help="pad every tree to this many nodes (SST's largest has 111; 0: a "
                           "bucket per batch, more programs to compile for no speed-up here)")
  args = parser.parse_args(argv)
  for line in certify_lines(args.spaces, args.batch_size, args.hidden, args.width,
                            args.max_nodes or None):
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
  sys.exit(main())
