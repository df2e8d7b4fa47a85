"""The cost of sound floating point: certification and ARC training throughput in the sound
interval domain (``interval.SOUND``, outward rounding) against the same rules unrounded
(``interval.UNROUNDED``), side by side in one run.

Each measurement runs in a fresh process; the two domains alternate ``--rounds`` times and the
best of each is kept (the machine is shared and noisy). ``cpu_*`` rates divide by the process's
CPU time instead of the wall time, the steadier measure on a loaded machine. Workloads, on real
SST-2 data, hidden 100, batch 32, fixed random weights:

* ``certify``: sentences/s of the jitted DP on the first ``--sentences`` test sentences sorted
  by length, best of three passes after compilation;
* ``arc_train``: steps/s of the jitted ``value_and_grad`` of the ARC loss (cross-entropy on the
  worst-case logits, ε = 1) on the first ``--steps`` training batches.

    python benchmarks/rounding_cost.py [--space SPEC] [--rounds 2]

Prints one JSON line per workload with both throughputs and their ratios (sound / unrounded).

With ``--workdir RUN`` it measures the other cost, in certificates: a trained run's test split
certified in both domains under the run's space (or ``--space``), with how many certificates
the outward rounding loses and by how much it lowers the margins.

    python benchmarks/rounding_cost.py --workdir results/arc_lstm_del2sub2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(what: str, spec: str, sentences: int, steps: int, domain_name: str) -> dict:
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  import optax  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel

  from arc_jax import interval  # pylint: disable=import-outside-toplevel
  from arc_jax.certify import certify_jit, make_certify_fn  # pylint: disable=import-outside-toplevel
  from arc_jax.data import prepare_lstm_data  # pylint: disable=import-outside-toplevel
  from arc_jax.nn import LSTMClassifier  # pylint: disable=import-outside-toplevel
  from arc_jax.perturbation import PlanBuilder, data_space  # pylint: disable=import-outside-toplevel

  domain = {"sound": interval.SOUND, "unrounded": interval.UNROUNDED}[domain_name]
  data = prepare_lstm_data("sst2")
  space = data_space(data, spec)
  slots = max((len(c) for c in data.synonyms.values()), default=1)
  builder = PlanBuilder(space, data.vocab, min_replacement_slots=slots)
  model = LSTMClassifier(data.embeddings, hidden=100, rngs=nnx.Rngs(0))
  split = data.splits["test" if what == "certify" else "train"]
  count = sentences if what == "certify" else steps * 32
  tokens, labels = split.tokens[:count], np.asarray(split.labels[:count], np.int32)
  order = np.argsort([len(s) for s in tokens], kind="stable") if what == "certify" else (
      np.arange(len(tokens)))
  batches = [(builder.build([tokens[i] for i in order[s:s + 32]], batch_size=32),
              np.pad(labels[order[s:s + 32]], (0, 32 - len(order[s:s + 32]))))
             for s in range(0, len(order), 32)]
  if what == "certify":
    graphdef, state = nnx.split(model)
    run = lambda plan, y: certify_jit(graphdef, space.signature, state, plan, y,
                                      domain=domain).certified
    unit = len(tokens)
  else:
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    certify_fn = make_certify_fn(graphdef, space, domain)

    def loss(p, plan, y):
      cert = certify_fn((p, rest), plan, y, 1.0)
      return optax.softmax_cross_entropy_with_integer_labels(cert.worst_case_logits, y).mean()

    grad = jax.jit(jax.value_and_grad(loss))
    run = lambda plan, y: grad(params, plan, y)
    unit = len(batches)
  passes, cpu = [], []
  for _ in range(4):
    start, start_cpu = time.perf_counter(), time.process_time()
    jax.block_until_ready([run(plan, y) for plan, y in batches])
    passes.append(time.perf_counter() - start)
    cpu.append(time.process_time() - start_cpu)
  return {"per_s": unit / min(passes[1:]), "cpu_per_s": unit / min(cpu[1:]),
          "compile_s": passes[0] - min(passes[1:])}


def certificates(workdir: str, spec: str | None) -> dict:
  """A trained run's test certificates in both domains, compared sentence by sentence."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  from arc_jax import interval  # pylint: disable=import-outside-toplevel
  from arc_jax.certify import certify  # pylint: disable=import-outside-toplevel
  from arc_jax.evaluation import load_experiment  # pylint: disable=import-outside-toplevel

  model, experiment = load_experiment(workdir, **({"space": spec} if spec else {}))
  examples, labels = experiment.examples("test")
  labels = np.asarray(labels)
  out = {name: certify(model, experiment.space, examples, labels, experiment.data.vocab,
                       domain=domain)
         for name, domain in (("sound", interval.SOUND), ("unrounded", interval.UNROUNDED))}
  # The least margin over the other classes, per sentence (its own class's margin is 0).
  others = np.arange(out["sound"]["margins"].shape[1]) != labels[:, None]
  least = {name: np.min(np.where(others, o["margins"], np.inf), axis=1)
           for name, o in out.items()}
  sound, unrounded = out["sound"]["certified"], out["unrounded"]["certified"]
  loss = least["unrounded"] - least["sound"]
  return {"benchmark": "rounding_cost_certificates", "run": workdir,
          "space": str(experiment.config.space), "examples": len(labels),
          "certified_sound": int(sound.sum()), "certified_unrounded": int(unrounded.sum()),
          "lost_to_rounding": int((unrounded & ~sound).sum()),
          "gained": int((sound & ~unrounded).sum()),
          "median_margin_loss": float(np.median(loss)), "largest_margin_loss": float(loss.max()),
          "least_unrounded_certified_margin": float(least["unrounded"][unrounded].min(
              initial=np.inf))}


def measure(domain: str, args, what: str) -> dict:
  out = subprocess.run([sys.executable, __file__, "--worker", what, "--domain", domain,
                        "--space", args.space, "--sentences", str(args.sentences),
                        "--steps", str(args.steps)],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, check=True,
                       capture_output=True, text=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--space", help="default [(Sub,2),(Del,2)] (with --workdir: the run's)")
  parser.add_argument("--workdir", help="a trained run: its certificates in both domains")
  parser.add_argument("--sentences", type=int, default=512)
  parser.add_argument("--steps", type=int, default=8)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--worker", choices=("certify", "arc_train"))
  parser.add_argument("--domain", choices=("sound", "unrounded"), default="sound")
  args = parser.parse_args(argv)
  if args.workdir:
    print(json.dumps(certificates(args.workdir, args.space)), flush=True)
    return 0
  args.space = args.space or "[(Sub,2),(Del,2)]"
  if args.worker:
    print(json.dumps(worker(args.worker, args.space, args.sentences, args.steps, args.domain)))
    return 0
  for what in ("certify", "arc_train"):
    runs = {"sound": [], "unrounded": []}
    for _ in range(args.rounds):
      for name in ("unrounded", "sound"):
        runs[name].append(measure(name, args, what))
    best = {(name, key): max(r[key] for r in runs[name])
            for name in runs for key in ("per_s", "cpu_per_s")}
    unit = "sentences_per_s" if what == "certify" else "steps_per_s"
    print(json.dumps({
        "benchmark": f"rounding_cost_{what}", "space": args.space,
        "backend": __import__("jax").default_backend(),
        **{f"{name}_{'cpu_' if key == 'cpu_per_s' else ''}{unit}": round(value, 2)
           for (name, key), value in best.items()},
        "ratio": round(best["sound", "per_s"] / best["unrounded", "per_s"], 3),
        "cpu_ratio": round(best["sound", "cpu_per_s"] / best["unrounded", "cpu_per_s"], 3),
        "sound_compile_s": round(min(r["compile_s"] for r in runs["sound"]), 1),
        "unrounded_compile_s": round(min(r["compile_s"] for r in runs["unrounded"]), 1),
        "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
