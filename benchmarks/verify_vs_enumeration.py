"""Exact robustness of a trained run: the complete verifier against enumeration, one JSON line.

    python benchmarks/verify_vs_enumeration.py --workdir RUN [--space SPEC] [--limit 200]
        [--window-rule first] [--blocks 1] [--enumerate-below 8192] [--max-nodes 4096]
        [--no-ex] [--passes 3] [--domain interval|linear_step]

On the first ``limit`` test sentences of the run's checkpoint, times :func:`arc_jax.verify.verify`
and the EX protocol (:func:`arc_jax.attacks.exhaustive_robustness`, with the DP's certificates as
its shortcut, as ``evaluate.py --metrics ex`` runs it; the certification time is included), and
compares them example by example: ``mismatches`` lists the examples where a decided verdict of
the verifier differs from EX (must be empty). ``--no-ex`` only runs the verifier (spaces too
large to enumerate).

Both run ``--passes`` times, alternating (EX first): the first pass compiles what each needs
(``first_pass_seconds``; the shapes both compile, the DP's on S(x) and predict's, are paid by
EX there), the later ones reuse it, and ``speedup`` is the best later pass of EX over the best
later pass of the verifier (with one pass, the first passes' ratio); ``cpu_speedup`` the same
ratio of process CPU seconds (steadier on a loaded machine).
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
from arc_jax.verify import DEFAULT_WINDOW_RULE, NOT_ROBUST, ROBUST, UNKNOWN, WINDOW_RULES, verify
from linear_step_cf import DOMAINS


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--space", help="default: the run's space")
  parser.add_argument("--limit", type=int, default=200)
  parser.add_argument("--window-rule", choices=WINDOW_RULES, default=DEFAULT_WINDOW_RULE)
  parser.add_argument("--blocks", type=int, default=1)
  parser.add_argument("--enumerate-below", type=int, default=8192)
  parser.add_argument("--max-nodes", type=int, default=4096)
  parser.add_argument("--ex", action=argparse.BooleanOptionalAction, default=True)
  parser.add_argument("--passes", type=int, default=3,
                      help="runs of each, alternating; the first compiles")
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

  def run_verify():
    return verify(model, space, sentences, labels, vocab, window_rule=args.window_rule,
                  blocks=args.blocks, enumerate_below=args.enumerate_below,
                  max_nodes=args.max_nodes, min_replacement_slots=slots,
                  domain=DOMAINS[args.domain])

  def run_ex():
    certified = certify(model, space, sentences, labels, vocab).certified
    return exhaustive_robustness(functools.partial(predict, graphdef, state), space, sentences,
                                 labels, vocab, certified=certified, batch_size=256), certified

  timed = {"ex": [], "verify": []}
  cpu = {"ex": [], "verify": []}
  for _ in range(args.passes):
    for name, fn in (("ex", run_ex), ("verify", run_verify))[0 if args.ex else 1:]:
      tic, cpu_tic = time.perf_counter(), time.process_time()
      outcome = fn()
      timed[name].append(time.perf_counter() - tic)
      cpu[name].append(time.process_time() - cpu_tic)
      if name == "ex":
        ex, certified = outcome
      else:
        result = outcome
  best = lambda name, times=timed: min(times[name][1:] or times[name])
  out = {"benchmark": "verify_vs_enumeration", "run": args.workdir, "space": config.space,
         "sentences": len(sentences), "domain": args.domain, "window_rule": args.window_rule,
         "blocks": args.blocks,
         "enumerate_below": args.enumerate_below, "max_nodes": args.max_nodes,
         "passes": args.passes,
         "choices_median": int(np.median([v.choices for v in result.verdicts])),
         "choices_max": int(max(v.choices for v in result.verdicts)),
         "verify": {**result.summary(), "seconds": round(best("verify"), 2),
                    "cpu_seconds": round(best("verify", cpu), 2),
                    "first_pass_seconds": round(timed["verify"][0], 2)}}
  if args.ex:
    status = [v.status for v in result.verdicts]
    mismatches = [i for i, (s, r) in enumerate(zip(status, ex.robust))
                  if (s == ROBUST and not r) or (s == NOT_ROBUST and r)]
    out["ex"] = {"robust": int(ex.robust.sum()), "certified": int(certified.sum()),
                 "members_evaluated": int(ex.members_evaluated.sum()),
                 "seconds": round(best("ex"), 2), "cpu_seconds": round(best("ex", cpu), 2),
                 "first_pass_seconds": round(timed["ex"][0], 2)}
    out["mismatches"] = mismatches
    out["unknown_but_ex_robust"] = int(sum(s == UNKNOWN and r
                                           for s, r in zip(status, ex.robust)))
    out["speedup"] = round(best("ex") / best("verify"), 2)
    out["cpu_speedup"] = round(best("ex", cpu) / best("verify", cpu), 2)
  print(json.dumps(out))


if __name__ == "__main__":
  main()
