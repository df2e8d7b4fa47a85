"""Robustness numbers of a trained run: Acc, CF Acc and EX Acc on a split, under any space.

* ``acc``: the clean prediction (concrete forward pass) equals the label.
* ``cf``: certified by the ARC DP: no string of S(x) changes the prediction away from y.
* ``ex``: exhaustive: every string of S(x) is classified y (``arc_jax.attacks``); certified
  examples count as robust without enumeration unless ``shortcut=False``, which enumerates them
  too and reports every certified example with a misclassified member (an audit failure).

Denominators are every example of the split. Sentences left empty by the out-of-vocabulary
policy are kept and classified as the empty input (their S(x) is {x}); the results list them.
The model is rebuilt from the run's ``config.json``: parameters from a checkpoint, the frozen
embeddings from the data files (so the space, and the synonym lexicon, may differ from
training).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from arc_jax.attacks import exhaustive_robustness
from arc_jax.data import iterate_batches
from arc_jax.nn import predict
from arc_jax.train import parallel
from arc_jax.train.checkpoints import Checkpoints, RunDirectory
from arc_jax.train.experiment import SPLITS, build_experiment
from arc_jax.train.steps import (classify_and_certify, init_state, make_eval_step, make_optimizer,
                                 zero_totals)

METRICS = ("acc", "cf", "ex")


class EvaluationError(RuntimeError):
  """The numbers are inconsistent (CF ≤ EX ≤ Acc fails) or a certificate failed its audit."""


def _restore(run: RunDirectory, experiment, which: str):
  """(params, meta) of the run's ``"best"`` or ``"latest"`` checkpoint."""
  checkpoints = Checkpoints(run.path, read_only=True)
  try:
    if which == "best":
      return checkpoints.restore_best(experiment.params)
    if which != "latest":
      raise ValueError(f"Unknown checkpoint {which!r}; choose 'best' or 'latest'.")
    c = experiment.config
    template = init_state(experiment.params,
                          make_optimizer(c.learning_rate, c.weight_decay, c.grad_clip), c.seed)
    restored = checkpoints.restore_latest(parallel.put(template, parallel.replicated(
        experiment.mesh)), parallel.put(zero_totals(), parallel.replicated(experiment.mesh)))
    if restored is None:
      raise FileNotFoundError(f"No checkpoint in {run.path / 'checkpoints'}; train the run first.")
    state, _, meta = restored
    return state.params, meta
  finally:
    checkpoints.close()


def make_predict_fn(graphdef: nnx.GraphDef, params: nnx.State, rest: nnx.State, mesh: Mesh):
  """``predict_logits(token_ids (B, N), lengths (B,)) -> logits (B, K)`` (numpy).

  The rows are split over the mesh; the logits are gathered from every host.
  """
  full_graphdef, state = nnx.split(nnx.merge(graphdef, params, rest))
  sharded = parallel.batch_sharded(mesh)

  def predict_logits(token_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    logits = predict(full_graphdef, state, *parallel.put((token_ids, lengths), sharded))
    return multihost_utils.process_allgather(logits, tiled=True)

  return predict_logits


def _clean_correct(predict_logits, tokens, labels, vocab, batch_size) -> np.ndarray:
  correct = np.zeros(len(tokens), bool)
  for batch in iterate_batches(tokens, labels, vocab, batch_size, shuffle=False):
    z = predict_logits(batch.token_ids, batch.lengths)
    real = batch.indices >= 0
    correct[batch.indices[real]] = np.argmax(z, axis=-1)[real] == batch.labels[real]
  return correct


def _metric(flags: np.ndarray, seconds: float, **extra) -> dict[str, Any]:
  return {"value": round(float(flags.mean()), 6), "count": int(flags.sum()),
          "total": len(flags), "seconds": round(seconds, 3), **extra}


def evaluate_run(workdir, *, space: str | None = None, split: str = "test",
                 metrics: Sequence[str] = METRICS, shortcut: bool = True,
                 checkpoint: str = "best", synonyms: str | None = None,
                 max_candidates: int | None = None, exhaustive_batch_size: int = 256,
                 progress: bool = True, mesh: Mesh | None = None) -> dict[str, Any]:
  """Evaluates a run's checkpoint; returns the JSON-ready results.

  Args:
    workdir: a run directory (``experiments/train.py``).
    space: spec of the perturbation space; default the run's ``config.space``.
    split: ``"train"``, ``"validation"`` or ``"test"`` (limited like training by the config's
      ``num_*`` fields).
    metrics: any of ``"acc"``, ``"cf"``, ``"ex"``; ``ex`` also computes the certificates it
      trusts (shortcut) or audits (no shortcut).
    shortcut: trust certificates in ``ex`` (False: enumerate certified examples too).
    checkpoint: ``"best"`` (the selected epoch) or ``"latest"``.
    synonyms, max_candidates: override the run's synonym lexicon (e.g. evaluate on S_review
      with every PPDB candidate, ``max_candidates=0``).
    exhaustive_batch_size: rows per predictor call in ``ex`` (a multiple of the devices).
    progress: tqdm bar during ``ex``.
    mesh: the data mesh; default all devices.

  Raises:
    EvaluationError: CF ≤ EX ≤ Acc fails, or (``shortcut=False``) an audit failure; the
      results are in the exception's ``results`` attribute.
  """
  unknown = sorted(set(metrics) - set(METRICS))
  if unknown or not metrics:
    raise ValueError(f"Unknown metrics {unknown or list(metrics)}; choose from {METRICS}.")
  if split not in SPLITS:
    raise ValueError(f"Unknown split {split!r}; choose one of {sorted(SPLITS)}.")
  run = RunDirectory(workdir)
  config = run.config()
  for field, value in (("space", space), ("synonyms", synonyms),
                       ("max_candidates", max_candidates)):
    if value is not None:
      config[field] = value
  experiment = build_experiment(config, mesh)
  mesh = experiment.mesh
  parallel.check_batch_size(exhaustive_batch_size, mesh, "exhaustive_batch_size")
  params, meta = _restore(run, experiment, checkpoint)
  data = experiment.splits[split]
  tokens, labels, vocab = data.tokens, data.labels, experiment.data.vocab
  predict_logits = make_predict_fn(experiment.graphdef, params, experiment.rest, mesh)
  results: dict[str, Any] = {
      "run": str(run.path), "name": config.name,
      "checkpoint": {"which": checkpoint, "step": meta["step"],
                     **({"epoch": meta["epoch"]} if "epoch" in meta else {})},
      "split": split, "space": config.space, "synonyms": config.synonyms,
      "max_candidates": config.max_candidates, "examples": len(tokens),
      "empty_examples": {
          "indices": [i for i, t in enumerate(tokens) if not t],
          "policy": "kept and classified as the empty input; every denominator counts them"},
      "devices": mesh.size, "metrics": {}}
  out = results["metrics"]
  flags = {}
  if "acc" in metrics:
    tic = time.perf_counter()
    flags["acc"] = _clean_correct(predict_logits, tokens, labels, vocab, config.eval_batch_size)
    out["acc"] = _metric(flags["acc"], time.perf_counter() - tic)
  if "cf" in metrics or "ex" in metrics:
    tic = time.perf_counter()
    batches = iterate_batches(tokens, labels, vocab, config.eval_batch_size, shuffle=False,
                              plan_builder=experiment.plan_builder)
    eval_step = make_eval_step(experiment.graphdef, experiment.space.signature, mesh)
    _, flags["cf"] = classify_and_certify(eval_step, params, experiment.rest, batches,
                                          len(tokens), mesh)
    out["cf"] = _metric(flags["cf"], time.perf_counter() - tic)
  if "ex" in metrics:
    tic = time.perf_counter()
    ex = exhaustive_robustness(predict_logits, experiment.space, tokens, labels, vocab,
                               certified=flags["cf"], shortcut=shortcut,
                               batch_size=exhaustive_batch_size, progress=progress)
    summary = ex.summary()
    flags["ex"] = ex.robust
    out["ex"] = _metric(ex.robust, time.perf_counter() - tic, shortcut=shortcut,
                        enumerated=summary["num_enumerated"],
                        members_evaluated=summary["members_evaluated"],
                        audit_failures=summary["audit_failures"])
  _check(results, flags)
  return results


def _check(results: dict[str, Any], flags: dict[str, np.ndarray]) -> None:
  """Raises EvaluationError unless CF ≤ EX ≤ Acc (counts) and no audit failed."""
  counts = [(name, int(flags[name].sum())) for name in ("cf", "ex", "acc") if name in flags]
  problems = [f"{a} {x} > {b} {y}" for (a, x), (b, y) in zip(counts, counts[1:]) if x > y]
  failures = results["metrics"].get("ex", {}).get("audit_failures", [])
  if failures:
    problems.append(f"{len(failures)} certified example(s) have a misclassified member (audit "
                    f"failures; first: {failures[0]})")
  if problems:
    error = EvaluationError("Inconsistent robustness numbers: " + "; ".join(problems) + ".")
    error.results = results
    raise error


def results_path(workdir, split: str, space: str, shortcut: bool) -> Path:
  """``<workdir>/eval/<split>_<space letters and digits>[_audit].json``."""
  name = f"{split}_{re.sub(r'[^A-Za-z0-9]+', '', space)}{'' if shortcut else '_audit'}.json"
  return Path(workdir) / "eval" / name


def write_results(results: dict[str, Any], path) -> None:
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(results, indent=2) + "\n")
