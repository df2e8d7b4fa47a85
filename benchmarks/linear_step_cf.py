"""CF Acc and certification cost of a committed model under the interval domain and the
linear-step domain (:mod:`arc_jax.linear_step`), side by side in one run.

For the run folder ``--workdir`` (e.g. ``results/normal_lstm``, its exported best model) and the
space ``--space``, certifies the test sentences (the first ``--first``, default all) in batches of
32 sorted by length and reachable grid, as ``cf`` of ``experiments/evaluate.py`` does, under both
domains: CF Acc (correct and certified), the median width of the certified logit range, and the
seconds of the pass (compilation included). Then ``--timed`` batches spread over the lengths
(already compiled) are
certified once more per domain, alternating, best of ``--rounds``: sentences/s after compilation.
Prints one JSON object.

    python benchmarks/linear_step_cf.py --workdir results/normal_lstm \\
        --space "[(Del,2),(Sub,2)]" [--first N] [--timed 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np
from flax import nnx

from arc_jax import interval
from arc_jax.certify.api import certification_order, certify_jit
from arc_jax.data.paths import data_folder
from arc_jax.evaluation import restore_run
from arc_jax.linear_step import LINEAR_STEP
from arc_jax.perturbation.plans import reachable_signature

DOMAINS = {"interval": interval.SOUND, "linear_step": LINEAR_STEP}
BATCH = 32


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--space", default=None, help="default: the run's space")
  parser.add_argument("--first", type=int, default=None)
  parser.add_argument("--timed", type=int, default=4, help="batches of the timed passes")
  parser.add_argument("--rounds", type=int, default=2)
  args = parser.parse_args()

  params, _, experiment = restore_run(args.workdir, data_dir=str(data_folder(None)))
  config = experiment.config
  spec = args.space or config.space
  graphdef, state = nnx.split(nnx.merge(experiment.graphdef, params, experiment.rest))
  test = experiment.splits["test"]
  n = len(test) if args.first is None else min(args.first, len(test))
  sentences, labels = list(test.tokens[:n]), np.asarray(test.labels[:n])
  space = experiment.family.lowering.make_space(experiment.data, spec)
  builder = experiment.family.lowering.make_builder(experiment.data, space, config.max_dp_shapes)
  order = certification_order(builder, sentences)
  batches = []
  for start in range(0, n, BATCH):
    idx = order[start:start + BATCH]
    plan = builder.build([sentences[i] for i in idx], batch_size=BATCH)
    y = np.zeros((BATCH,), np.int32)
    y[:len(idx)] = labels[idx]
    batches.append((idx, plan, reachable_signature(space, plan, builder.shape_menu), y))

  def certify(domain, batch):
    idx, plan, sig, y = batch
    cert = certify_jit(graphdef, sig, state, plan, y, domain=domain)
    return jax.tree.map(lambda a: np.asarray(a)[:len(idx)], cert)

  results = {"workdir": args.workdir, "space": spec, "sentences": n,
             "device": jax.devices()[0].device_kind, "domains": {}}
  for name, domain in DOMAINS.items():
    tic = time.perf_counter()
    certified, widths = np.zeros(n, bool), np.zeros(n)
    for batch in batches:
      cert = certify(domain, batch)
      correct = cert.clean_logits.argmax(-1) == labels[batch[0]]
      certified[batch[0]] = cert.certified & correct
      widths[batch[0]] = np.max(cert.logits.hi - cert.logits.lo, axis=-1)
    results["domains"][name] = {"cf": round(float(certified.mean()), 6),
                                "certified": int(certified.sum()),
                                "median_logit_width": round(float(np.median(widths)), 4),
                                "seconds_with_compilation": round(time.perf_counter() - tic, 1)}
  timed = [batches[i] for i in np.unique(np.linspace(0, len(batches) - 1, args.timed).astype(int))]
  best = {name: float("inf") for name in DOMAINS}
  for _ in range(args.rounds):
    for name, domain in DOMAINS.items():
      tic = time.perf_counter()
      for batch in timed:
        certify(domain, batch)
      best[name] = min(best[name], time.perf_counter() - tic)
  count = sum(len(b[0]) for b in timed)
  for name in DOMAINS:
    results["domains"][name]["sentences_per_s"] = round(count / best[name], 2)
  results["cf_gain"] = round(results["domains"]["linear_step"]["cf"]
                             - results["domains"]["interval"]["cf"], 6)
  results["slowdown"] = round(results["domains"]["interval"]["sentences_per_s"]
                              / results["domains"]["linear_step"]["sentences_per_s"], 2)
  print(json.dumps(results))


if __name__ == "__main__":
  main()
