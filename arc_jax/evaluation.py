"""Robustness numbers of a trained run: Acc, CF Acc, EX Acc and HF Acc on a split, under any space.

* ``acc``: the clean prediction (concrete forward pass) equals the label.
* ``cf``: certified by the ARC DP: no string of S(x) changes the prediction away from y.
* ``ex``: exhaustive: every string of S(x) is classified y (``arc_jax.attacks``); certified
  examples count as robust without enumeration unless ``shortcut=False``, which enumerates them
  too and reports every certified example with a misclassified member (an audit failure).
* ``hf``: HotFlip: x and the ``beam`` strings of a HotFlip beam search in S(x) are all
  classified y (``arc_jax.attacks.hotflip_robustness``, REFERENCE.md §8).

Per example, certified ⇒ EX-robust ⇒ HF-robust ⇒ correct (the HotFlip strings are members of
S(x)), so CF ≤ EX ≤ HF ≤ Acc; every evaluation checks this for the metrics it computes.

Denominators are every example of the split. Sentences left empty by the out-of-vocabulary
policy are kept and classified as the empty input (their S(x) is {x}); the results list them.
The model is rebuilt from the run's ``config.json``: parameters from a checkpoint, the frozen
embeddings from the data files (so the space, and the synonym lexicon, may differ from
training). The run's task (:mod:`arc_jax.train.tasks`) supplies the batches, the evaluation
functions and the enumeration: for Tree-LSTMs an example is a tree, every metric is the root's
(the root's prediction, certificate, and every tree of S(t) at the root), and ``hf`` is not
available.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arc_jax import parallel
from arc_jax.attacks import hotflip_robustness
from arc_jax.train.checkpoints import Checkpoints, RunDirectory
from arc_jax.train.config import ConfigError, validate
from arc_jax.train.experiment import SPLITS, Experiment, build_experiment
from arc_jax.train.steps import (RowsFn, config_optimizer, evaluate_split, init_state,
                                 make_eval_step, zero_totals)
from arc_jax.train.tasks import TASKS

METRICS = ("acc", "cf", "ex", "hf")

ROBUSTNESS_ORDER = ("cf", "ex", "hf", "acc")
"""Per example, each metric implies the next: certified ⇒ EX-robust ⇒ HF-robust ⇒ correct."""


class EvaluationError(RuntimeError):
  """The numbers are inconsistent (CF ≤ EX ≤ HF ≤ Acc fails) or a certificate failed its audit."""


def _restore(run: RunDirectory, experiment, which: str):
  """(params, meta) of the run's ``"best"`` or ``"latest"`` checkpoint."""
  checkpoints = Checkpoints(run.path, read_only=True)
  try:
    if which == "best":
      return checkpoints.restore_best(experiment.params)
    if which != "latest":
      raise ConfigError(f"Unknown checkpoint {which!r}; choose 'best' or 'latest'.")
    c = experiment.config
    template = init_state(experiment.params, config_optimizer(c), c.seed)
    restored = checkpoints.restore_latest(parallel.put(template, parallel.replicated(
        experiment.mesh)), parallel.put(zero_totals(), parallel.replicated(experiment.mesh)))
    if restored is None:
      raise FileNotFoundError(f"No checkpoint in {run.path / 'checkpoints'}; train the run first.")
    state, _, meta = restored
    return state.params, meta
  finally:
    checkpoints.close()


def _row_flags(experiment: Experiment, params: nnx.State, split: str, rows_fn: RowsFn,
               certify: bool) -> dict[str, np.ndarray]:
  """The jitted ``rows_fn`` over ``split`` in eval batches: bool (n,) per key of its output."""
  task, mesh = experiment.task, experiment.mesh
  batches = task.batches(experiment, split, experiment.config.eval_batch_size, certify=certify)
  return evaluate_split(make_eval_step(experiment.graphdef, rows_fn, mesh), params,
                        experiment.rest, batches, len(experiment.splits[split]),
                        lambda batch: task.put(batch, mesh))


def _metric(flags: np.ndarray, seconds: float, **extra) -> dict[str, Any]:
  return {"value": round(float(flags.mean()), 6), "count": int(flags.sum()),
          "total": len(flags), "seconds": round(seconds, 3), **extra}


def evaluate_run(workdir, *, space: str | None = None, split: str = "test",
                 metrics: Sequence[str] | None = None, shortcut: bool = True,
                 checkpoint: str = "best", synonyms: str | None = None,
                 max_candidates: int | None = None, exhaustive_batch_size: int = 256,
                 beam: int = 5, progress: bool = True, mesh: Mesh | None = None
                 ) -> dict[str, Any]:
  """Evaluates a run's checkpoint; returns the JSON-ready results.

  Args:
    workdir: a run directory (``experiments/train.py``).
    space: spec of the perturbation space; default the run's ``config.space``.
    split: ``"train"``, ``"validation"`` or ``"test"`` (limited like training by the config's
      ``num_*`` fields).
    metrics: any of ``"acc"``, ``"cf"``, ``"ex"``, ``"hf"`` (``hf`` not for Tree-LSTMs);
      default every metric the run's model supports. ``ex`` also computes the certificates it
      trusts (shortcut) or audits (no shortcut).
    shortcut: trust certificates in ``ex`` (False: enumerate certified examples too).
    checkpoint: ``"best"`` (the selected epoch) or ``"latest"``.
    synonyms, max_candidates: override the run's synonym lexicon (e.g. evaluate on S_review
      with every PPDB candidate, ``max_candidates=0``).
    exhaustive_batch_size: rows per predictor call in ``ex`` (a multiple of the devices).
    beam: HotFlip beam width of ``hf`` (candidates per example; 5 as in the paper). The search
      runs ``eval_batch_size`` sentences together (``eval_batch_size · beam`` gradient rows).
    progress: tqdm bars during ``ex`` and ``hf``.
    mesh: the data mesh; default all devices.

  Raises:
    EvaluationError: CF ≤ EX ≤ HF ≤ Acc fails (per example, over the metrics computed), or
      (``shortcut=False``) an audit failure; the results are in the exception's ``results``
      attribute.
  """
  unknown = sorted(set(metrics or ()) - set(METRICS))
  if unknown or (metrics is not None and not metrics):
    raise ConfigError(f"Unknown metrics {unknown or list(metrics)}; choose from {METRICS}.")
  if split not in SPLITS:
    raise ConfigError(f"Unknown split {split!r}; choose one of {sorted(SPLITS)}.")
  if beam < 1:
    raise ConfigError(f"beam={beam}: HF Acc needs at least one HotFlip candidate per example; "
                      "pass beam >= 1 (--beam, default 5).")
  run = RunDirectory(workdir)
  config = run.config()
  lexicon = {"synonyms": synonyms, "max_candidates": max_candidates}
  if config.trainable_embeddings and any(v not in (None, config[k]) for k, v in lexicon.items()):
    raise ConfigError(f"The run in {run.path} trained its word vectors on the vocabulary of its "
                      f"lexicon (synonyms={config.synonyms!r}, max_candidates="
                      f"{config.max_candidates}); another lexicon would rebuild the vocabulary "
                      "and misalign them. Evaluate it with its own lexicon (leave out "
                      "--synonyms/--max-candidates).")
  for field, value in (("space", space), *lexicon.items()):
    if value is not None:
      config[field] = value
  validate(config, training=False)
  metrics = TASKS[config.model].metrics if metrics is None else metrics
  unavailable = sorted(set(metrics) - set(TASKS[config.model].metrics))
  if unavailable:
    raise ConfigError(f"Metrics {unavailable} are not available for {config.model!r} models "
                      "(HotFlip, hf, is implemented for token sequences only); choose from "
                      f"{TASKS[config.model].metrics}.")
  experiment = build_experiment(config, mesh)
  task, mesh = experiment.task, experiment.mesh
  parallel.check_batch_size(exhaustive_batch_size, mesh, "exhaustive_batch_size")
  params, meta = _restore(run, experiment, checkpoint)
  data = experiment.splits[split]
  results: dict[str, Any] = {
      "run": str(run.path), "name": config.name, "model": config.model,
      "checkpoint": {"which": checkpoint, "step": meta["step"],
                     **({"epoch": meta["epoch"]} if "epoch" in meta else {})},
      "split": split, "space": config.space, "synonyms": config.synonyms,
      "max_candidates": config.max_candidates, "examples": len(data),
      "empty_examples": task.empty_examples(data), "devices": mesh.size, "metrics": {}}
  out = results["metrics"]
  flags = {}
  if "acc" in metrics:
    tic = time.perf_counter()
    flags["acc"] = _row_flags(experiment, params, split, task.classify_rows, False)["correct"]
    out["acc"] = _metric(flags["acc"], time.perf_counter() - tic)
  if "cf" in metrics or "ex" in metrics:
    tic = time.perf_counter()
    flags["cf"] = _row_flags(experiment, params, split,
                             task.certify_rows(experiment.space.signature), True)["certified"]
    out["cf"] = _metric(flags["cf"], time.perf_counter() - tic)
  if "ex" in metrics:
    tic = time.perf_counter()
    ex = task.exhaustive(experiment, params, split, flags["cf"], shortcut=shortcut,
                         batch_size=exhaustive_batch_size, progress=progress)
    summary = ex.summary()
    flags["ex"] = ex.robust
    out["ex"] = _metric(ex.robust, time.perf_counter() - tic, shortcut=shortcut,
                        enumerated=summary["num_enumerated"],
                        members_evaluated=summary["members_evaluated"],
                        audit_failures=summary["audit_failures"])
  if "hf" in metrics:
    tic = time.perf_counter()
    hf = hotflip_robustness(experiment.graphdef, (params, experiment.rest), experiment.space,
                            data.tokens, data.labels, experiment.data.vocab, beam=beam,
                            batch_size=config.eval_batch_size, progress=progress, mesh=mesh)
    flags["hf"] = hf.robust
    out["hf"] = _metric(hf.robust, time.perf_counter() - tic, beam=beam,
                        counterexamples_found=sum(c is not None for c in hf.counterexamples),
                        candidates_evaluated=hf.summary()["candidates_evaluated"])
  _check(results, flags)
  return results


def _check(results: dict[str, Any], flags: dict[str, np.ndarray]) -> None:
  """Raises EvaluationError unless CF ≤ EX ≤ HF ≤ Acc and no audit failed.

  ``flags`` maps metric names to bool (n,) per-example outcomes. Each metric present is compared
  with the next one present in :data:`ROBUSTNESS_ORDER` per example (an example counted by the
  first must be counted by the second), which implies the order of the counts.
  """
  present = [name for name in ROBUSTNESS_ORDER if name in flags]
  problems = []
  for stronger, weaker in zip(present, present[1:]):
    broken = np.flatnonzero(flags[stronger] & ~flags[weaker])
    if len(broken):
      problems.append(
          f"{len(broken)} example(s) pass {stronger} but fail {weaker} ({stronger} "
          f"{int(flags[stronger].sum())}, {weaker} {int(flags[weaker].sum())}; first indices "
          f"{broken[:5].tolist()})")
  failures = results["metrics"].get("ex", {}).get("audit_failures", [])
  if failures:
    problems.append(f"{len(failures)} certified example(s) have a misclassified member (audit "
                    f"failures; first: {failures[0]})")
  if problems:
    error = EvaluationError("Inconsistent robustness numbers: " + "; ".join(problems) + ".")
    error.results = results
    raise error


def results_path(workdir, results: dict[str, Any], shortcut: bool) -> Path:
  """``<workdir>/eval/<split>_<space letters and digits>[_<metrics>][_audit].json``.

  The metrics are named when ``results`` holds fewer than its model supports (e.g.
  ``test_Del2Sub2_hf.json``), so a partial evaluation never overwrites a complete one.
  """
  held = [m for m in METRICS if m in results["metrics"]]
  partial = "" if set(held) == set(TASKS[results["model"]].metrics) else "_" + "_".join(held)
  space = re.sub(r"[^A-Za-z0-9]+", "", results["space"])
  name = f"{results['split']}_{space}{partial}{'' if shortcut else '_audit'}.json"
  return Path(workdir) / "eval" / name


def write_results(results: dict[str, Any], path) -> None:
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(results, indent=2) + "\n")
