"""Tree-LSTM ARC training throughput: the gradient of the ARC loss on SST train batches.

Times ``jax.value_and_grad`` of the tree ARC objective (λ = 0.5, ε = 1, dropout on; the loss of
``experiments/configs/tree.py:arc,SPACE``) on the first batches of epoch 0 (20 trees each,
padded to 128 nodes, PPDB with one candidate per word), best of ``--repeats`` passes after
compilation. ``--compare-autodiff`` also times the same gradient with ``bottom_up``
differentiated by JAX's autodiff of the same forward scan (its step rematerialised by
``jax.checkpoint``, as before the custom VJP) instead of by its custom VJP, interleaved with the
default, and prints the ratio and the largest gradient difference: the comparison of one run on a
shared, noisy machine.

    python benchmarks/tree_train_throughput.py [--space SPEC] [--batches N] [--compare-autodiff]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp
from flax import nnx

from arc_jax.certify import tree_dp
from arc_jax.data import batch_order, prepare_tree_data
from arc_jax.nn import tree_models
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation import data_space
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space
from arc_jax.train import losses

BATCH, NODES, HIDDEN, ROBUST_WEIGHT = 20, 128, 150, 0.5


def gradient_fn(graphdef, rest, signature, custom_vjp: bool):
  """The jitted ``value_and_grad`` of the ARC loss, ``bottom_up`` by its custom VJP or autodiff."""
  key = jax.random.key(0)

  def loss(params, trees):
    cert = tree_dp.certify_tree_model(nnx.merge(graphdef, params, rest), signature, trees,
                                      trees.labels, 1.0, key)
    clean = losses.node_cross_entropy(cert.clean_logits, trees.labels)
    robust = losses.node_cross_entropy(cert.worst_case_logits, trees.labels)
    return losses.arc_loss(clean, robust, ROBUST_WEIGHT)

  fn = jax.jit(jax.value_and_grad(loss))
  if custom_vjp:
    return fn
  fill = tree_models._fill

  def traced_with_autodiff(params, trees):
    tree_models._fill = lambda combine, *args: fill.fun(jax.checkpoint(combine), *args)
    try:  # only the first call traces
      return fn(params, trees)
    finally:
      tree_models._fill = fill

  return traced_with_autodiff


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--space", default="[(Del,2),(Sub,2)]")
  parser.add_argument("--batches", type=int, default=6)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--compare-autodiff", action="store_true")
  args = parser.parse_args(argv)
  data = prepare_tree_data(synonyms="ppdb", max_candidates=1)
  trees = data.splits["train"]
  space = tree_space(data_space(data, args.space))
  model = TreeLSTMClassifier(data.embeddings, hidden=HIDDEN, rngs=nnx.Rngs(0))
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  builder = TreeBatchBuilder(data.vocab, space, min_substitutes=1, node_buckets=(NODES,))
  order = batch_order([t.num_nodes for t in trees], BATCH, seed=0, epoch=0, shuffle=True)
  batches = [builder.build([trees[i] for i in idx], BATCH) for idx in order[:args.batches]]
  variants = {"custom_vjp": True, **({"autodiff": False} if args.compare_autodiff else {})}
  fns, compile_s, loss, grads = {}, {}, {}, {}
  for name, custom_vjp in variants.items():
    fns[name] = gradient_fn(graphdef, rest, space.signature, custom_vjp)
    tic = time.perf_counter()
    out = jax.block_until_ready([fns[name](params, b) for b in batches])
    compile_s[name], loss[name] = round(time.perf_counter() - tic, 1), float(out[0][0])
    grads[name] = [g for _, g in out]
  seconds = {name: [] for name in fns}
  for _ in range(args.repeats):
    for name, fn in fns.items():  # interleaved, so both see the same load
      tic = time.perf_counter()
      jax.block_until_ready([fn(params, b) for b in batches])
      seconds[name].append(time.perf_counter() - tic)
  line = {"benchmark": "tree_arc_train_gradient", "space": args.space, "batch": BATCH,
          "nodes": NODES, "hidden": HIDDEN, "batches": args.batches,
          **{f"{n}_steps_per_s": round(args.batches / min(s), 3) for n, s in seconds.items()},
          "first_pass_s": compile_s, "loss": loss}
  if args.compare_autodiff:
    line["custom_vjp_speedup"] = round(min(seconds["autodiff"]) / min(seconds["custom_vjp"]), 2)
    line["grad_max_abs_difference"] = float(max(jax.tree.leaves(jax.tree.map(
        lambda a, b: jnp.max(jnp.abs(a - b)), grads["custom_vjp"], grads["autodiff"]))))
  print(json.dumps(line), flush=True)


if __name__ == "__main__":
  sys.exit(main())
