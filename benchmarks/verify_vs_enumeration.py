"""Exact robustness of a trained run: the complete verifier against enumeration, one JSON line.

    python benchmarks/verify_vs_enumeration.py --workdir RUN [--space SPEC] [--limit 200]
        [--window-rule last] [--blocks 1] [--enumerate-below 64] [--max-nodes 4096]
        [--no-ex] [--domain interval|linear_step]

On the first ``limit`` test sentences of the run's checkpoint, times :func:`arc_jax.verify.verify`
and the EX protocol (:func:`arc_jax.attacks.exhaustive_robustness`, with the DP's certificates as
its shortcut, as ``evaluate.py --metrics ex`` runs it; the certification time is included), and
compares them example by example: ``mismatches`` lists the examples where a decided verdict of
the verifier differs from EX (must be empty). ``--no-ex`` only runs the verifier (spaces too
large to enumerate). Compilation is included in both times.
"""

from __future__ import annotations

import argparse
import functools
import json
import time

import numpy as np
from flax import nnx

from arc_jax.attacks import exhaustive_robustness
from arc_jax.certify import certify
from arc_jax.evaluation import restore_run
from arc_jax.nn import predict
from arc_jax.verify import NOT_ROBUST, ROBUST, UNKNOWN, WINDOW_RULES, verify
from linear_step_cf import DOMAINS


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--space", help="default: the run's space")
  parser.add_argument("--limit", type=int, default=200)
  parser.add_argument("--window-rule", choices=WINDOW_RULES, default="last")
  parser.add_argument("--blocks", type=int, default=1)
  parser.add_argument("--enumerate-below", type=int, default=64)
  parser.add_argument("--max-nodes", type=int, default=4096)
  parser.add_argument("--ex", action=argparse.BooleanOptionalAction, default=True)
  parser.add_argument("--domain", choices=tuple(DOMAINS), default="interval",
                      help="the verifier's certification domain (EX's shortcut stays interval)")
  args = parser.parse_args()

  params, _, experiment = restore_run(args.workdir, **({"space": args.space} if args.space else {}))
  config = experiment.config
  model = experiment.model(params)
  graphdef, state = nnx.split(model)
  test = experiment.splits["test"]
  sentences, labels = test.tokens[:args.limit], np.asarray(test.labels[:args.limit])
  space, vocab = experiment.space, experiment.data.vocab
  slots = experiment.builder.min_replacement_slots

  tic = time.perf_counter()
  result = verify(model, space, sentences, labels, vocab, window_rule=args.window_rule,
                  blocks=args.blocks, enumerate_below=args.enumerate_below,
                  max_nodes=args.max_nodes, min_replacement_slots=slots,
                  domain=DOMAINS[args.domain])
  verify_s = time.perf_counter() - tic
  out = {"benchmark": "verify_vs_enumeration", "run": args.workdir, "space": config.space,
         "sentences": len(sentences), "domain": args.domain, "window_rule": args.window_rule,
         "blocks": args.blocks,
         "enumerate_below": args.enumerate_below, "max_nodes": args.max_nodes,
         "choices_median": int(np.median([v.choices for v in result.verdicts])),
         "choices_max": int(max(v.choices for v in result.verdicts)),
         "verify": {**result.summary(), "seconds": round(verify_s, 2)}}
  if args.ex:
    tic = time.perf_counter()
    certified = certify(model, space, sentences, labels, vocab).certified
    ex = exhaustive_robustness(functools.partial(predict, graphdef, state), space, sentences,
                               labels, vocab, certified=certified, batch_size=256)
    ex_s = time.perf_counter() - tic
    status = [v.status for v in result.verdicts]
    mismatches = [i for i, (s, r) in enumerate(zip(status, ex.robust))
                  if (s == ROBUST and not r) or (s == NOT_ROBUST and r)]
    out["ex"] = {"robust": int(ex.robust.sum()), "certified": int(certified.sum()),
                 "members_evaluated": int(ex.members_evaluated.sum()), "seconds": round(ex_s, 2)}
    out["mismatches"] = mismatches
    out["unknown_but_ex_robust"] = int(sum(s == UNKNOWN and r
                                           for s, r in zip(status, ex.robust)))
    out["speedup"] = round(ex_s / verify_s, 2)
  print(json.dumps(out))


if __name__ == "__main__":
  main()
