"""Robustness numbers of a trained run: Acc, CF Acc, EX Acc and HF Acc on a split, under any space.

The metrics are the functions of :mod:`arc_jax.metrics`, chosen by name (``--metrics``):
``acc`` (clean accuracy), ``cf`` (certified by the ARC DP), ``ex`` (exhaustive enumeration of
S(x), trusting or auditing the certificates), ``hf`` (HotFlip beam search) and, for LSTMs and
Bi-LSTMs when asked for, ``exact`` (the complete verifier, :mod:`arc_jax.verify`).
:func:`evaluate_run` computes the requested ones in registry order and writes each as
``results["metrics"][name]``.

Per example, certified ⇒ (proved ⇒) EX-robust ⇒ HF-robust ⇒ correct (the HotFlip strings are
members of S(x)), so CF ≤ EX ≤ HF ≤ Acc; every evaluation checks this for the metrics it
computes (:data:`arc_jax.metrics.ROBUSTNESS_ORDER`).

Denominators are every example of the split. Sentences left empty by the out-of-vocabulary
policy are kept and classified as the empty input (their S(x) is {x}); the results list them.
The model is rebuilt from the run's ``config.json``: parameters from a checkpoint (or from an
exported model, :mod:`arc_jax.train.export`), the frozen
embeddings from the data files (so the space, and the synonym lexicon, may differ from
training). The run's model family (:mod:`arc_jax.train.families`) supplies the batches, the evaluation
functions, the enumeration and the HotFlip search: for Tree-LSTMs an example is a tree and every
metric is the root's (the root's prediction, certificate, and every tree of S(t), or of the
HotFlip search, at the root).

Every evaluation also reports the size of S(x) per example (``space_size``: max, median and mean
over the split of the number of application choices, ``Space.count`` / ``TreeSpace.count``), and
may be limited to the first N examples of the split (``first``), which its results and file
name record. ``cf`` and ``exact`` certify in the abstract domain named by ``domain``
(:mod:`arc_jax.domains`; default the sound intervals, ``"interval"``), made with its settings
(``domain_settings``); the results record both (``"domain"``, ``"domain_settings"``), and the
file name names a domain other than the default. With ``resume`` an exhaustive search (hours
for Tree-LSTMs under Ins) keeps what it has decided in a file and resumes from there after a
stop (``experiments/evaluate.py`` does so by default).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import jax
import ml_collections
import numpy as np
from jax.sharding import Mesh

from arc_jax import domains
from arc_jax import metrics as metric_registry
from arc_jax import parallel, per_example
from arc_jax.attacks.journal import Journal, digest
from arc_jax.data.paths import data_folder
from arc_jax.metrics import EXCLUSIONS, ROBUSTNESS_ORDER
from arc_jax.train.checkpoints import Checkpoints, RunDirectory, read_only_part
from arc_jax.train.config import ConfigError, validate
from arc_jax.train.experiment import SPLITS, build_experiment, data_fingerprint
from arc_jax.train.families.tree import TREE
from arc_jax.train.export import has_exported_model, has_kept_data, load_kept_data, load_model
from arc_jax.train.steps import (config_optimizer, init_state, trained_embedding_scale,
                                  zero_totals)
from arc_jax.verify import DEFAULT_WINDOW_RULE

logger = logging.getLogger(__name__)

PROGRESS_FILES = {"ex": ".progress.jsonl", "exact": ".exact.progress.jsonl"}
"""The searches that keep a journal (:mod:`arc_jax.attacks.journal`), and its file's suffix in
place of the results file's ``.json``."""


class EvaluationError(RuntimeError):
  """The numbers are inconsistent (CF ≤ EX ≤ HF ≤ Acc fails) or a certificate failed its audit."""


def _kept(run: RunDirectory, which: str) -> bool:
  """Whether ``which`` checkpoint of the run is its kept model: ``"best"`` of a folder without
  Orbax best checkpoints that holds an exported model (``model/``, as the runs of ``results/``)."""
  return which == "best" and not (run.path / "best").exists() and has_exported_model(run.path)


def restore_params(run: RunDirectory, experiment, which: str, fingerprint: dict):
  """(params, meta) of the run's ``"best"`` or ``"latest"`` checkpoint, for the model of
  ``experiment`` (:func:`~arc_jax.train.experiment.build_experiment` of the run's config); meta
  holds the checkpoint's ``step`` and ``epoch``.

  A kept model (:func:`_kept`, :mod:`arc_jax.train.export`) gives its exported best parameters,
  if it was trained on data of this ``fingerprint``.
  """
  if _kept(run, which):
    return load_model(run.path, experiment.params, fingerprint)
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


def load_run(workdir, checkpoint: str = "best", space: str | None = None):
  """``(model, vocab, space)`` of a trained run, in one call: the model with the parameters of
  its ``"best"`` (selected epoch) or ``"latest"`` Orbax checkpoint (a folder of ``results/``
  gives its kept best model, :mod:`arc_jax.train.export`), the vocabulary (word → id) and the
  run's perturbation space, or the space ``space`` (a spec) over the run's lexicon, restricted to
  the vocabulary (a tree space for Tree-LSTMs).

  A kept model that holds its data (every run of ``results/``) loads from its own files, with no
  data folder, in seconds. Otherwise the run's data and model are rebuilt from its
  ``config.json`` (the data files must be found, see :mod:`arc_jax.data.paths`) and the
  checkpoint is restored into them.
  """
  params, experiment = load_for_examples(workdir, checkpoint, space)
  return experiment.model(params), experiment.data.vocab, experiment.space


def load_for_examples(workdir, checkpoint: str = "best", space: str | None = None):
  """``(params, experiment)`` for certifying, attacking or verifying examples of one's own
  (:func:`load_run`'s, with the whole experiment: family, builder, placement): a kept model's
  experiment has its kept data and no splits; another run's is rebuilt from the data folder."""
  run = RunDirectory(workdir)
  data = load_kept_data(run.path) if _kept(run, checkpoint) and has_kept_data(run.path) else None
  params, _, experiment = _restore(run, checkpoint, {} if space is None else {"space": space},
                                   data)
  return params, experiment


def _restore(run: RunDirectory, checkpoint: str, overrides: dict, data=None):
  """:func:`restore_run` of a run directory; ``data``: the run's kept data (no splits) instead
  of the data folder's."""
  config = run.config()
  config.update(overrides)
  validate(config)
  experiment = build_experiment(config, data=data)
  params, meta = restore_params(run, experiment, checkpoint, experiment.data_fingerprint())
  return params, meta, experiment


def restore_run(workdir, checkpoint: str = "best", **overrides):
  """``(params, meta, experiment)`` of a run directory: the whole
  :class:`~arc_jax.train.experiment.Experiment` rebuilt from its ``config.json`` and the data
  folder, with ``overrides`` replacing fields of the config (e.g. ``space="[(Sub,2)]"`` to
  certify the model under another space), and the parameters and meta of its ``checkpoint``
  (:func:`restore_params`)."""
  return _restore(RunDirectory(workdir), checkpoint, overrides)


def load_experiment(workdir, checkpoint: str = "best", **overrides):
  """``(model, experiment)``: :func:`load_run`'s model and the whole
  :class:`~arc_jax.train.experiment.Experiment` of the run (its data splits, e.g.
  ``experiment.examples("test")``, and space), as :func:`restore_run` makes them."""
  params, _, experiment = restore_run(workdir, checkpoint, **overrides)
  return experiment.model(params), experiment


def _entry(robust: np.ndarray, seconds: float, extra: dict[str, Any]) -> dict[str, Any]:
  """A metric's results entry; a ``"seconds"`` in ``extra`` (the metric's own timing) wins."""
  extra = dict(extra)
  seconds = extra.pop("seconds", seconds)
  return {"value": round(float(robust.mean()), 6), "count": int(robust.sum()),
          "total": len(robust), "seconds": round(seconds, 3), **extra}


def evaluate_run(workdir, *, space: str | None = None, split: str = "test",
                 metrics: Sequence[str] | None = None, shortcut: bool = True,
                 checkpoint: str = "best", synonyms: str | None = None,
                 max_candidates: int | None = None, exhaustive_batch_size: int = 256,
                 beam: int = 5, first: int | None = None, progress: bool = True,
                 mesh: Mesh | None = None, exact_max_nodes: int = 4096,
                 exact_window_rule: str = DEFAULT_WINDOW_RULE,
                 resume: bool = False, domain: str = domains.DEFAULT,
                 domain_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """Evaluates a run's checkpoint; returns the JSON-ready results.

  Args:
    workdir: a run directory (``experiments/train.py``).
    space: spec of the perturbation space; default the run's ``config.space``.
    split: ``"train"``, ``"validation"`` or ``"test"`` (limited like training by the config's
      ``num_*`` fields).
    metrics: names of :data:`arc_jax.metrics.REGISTRY` (``"acc"``, ``"cf"``, ``"ex"``, ``"hf"``,
      ``"exact"``); default the registry's defaults for the run's model. A metric's ``needs``
      are computed and reported too (``ex`` computes the certificates it trusts, shortcut, or
      audits, no shortcut).
    shortcut: trust certificates in ``ex`` (False: enumerate certified examples too).
    checkpoint: ``"best"`` (the selected epoch) or ``"latest"``.
    synonyms, max_candidates: override the run's synonym lexicon (e.g. evaluate on S_review
      with every PPDB candidate, ``max_candidates=0``).
    exhaustive_batch_size: rows per predictor call in ``ex`` (a multiple of the devices).
    beam: HotFlip beam width of ``hf`` (candidates per example; 5 as in the paper). The search
      runs ``eval_batch_size`` examples together (``eval_batch_size · beam`` gradient rows).
    first: evaluate the first ``first`` examples of the split only (within the config's
      ``num_*`` limit); recorded in the results (``"first"``) and in their file name.
    progress: progress bars (one per metric).
    mesh: the data mesh; default all devices.
    exact_max_nodes: sub-spaces the ``exact`` search may certify per example before it
      reports the example unknown.
    exact_window_rule: where the ``exact`` search splits (:data:`arc_jax.verify.verifier.WINDOW_RULES`;
      recorded in the results as ``window_rule``).
    resume: ``ex`` and ``exact`` write each example to ``<results file>`` +
      :data:`PROGRESS_FILES` (next to :func:`results_path`) as soon as it is decided, and an
      evaluation with the same
      settings that stopped before the end (SIGTERM, a kill) is resumed from there
      (:mod:`arc_jax.attacks.journal`); the file is removed once every metric is computed.
      Single-process runs only (with several processes it is ignored).
    domain: the name of the abstract domain ``cf`` and ``exact`` certify in
      (:data:`arc_jax.domains.DOMAINS`, which the run's ``config.plugins`` may extend; default
      ``"interval"``, the sound intervals). Tree-LSTMs take the default only.
    domain_settings: the domain's settings, field → value (text is parsed as the field's type,
      as ``--domain-setting FIELD=VALUE`` gives it); the others keep their defaults.

  Raises:
    ConfigError: (naming the fix, before any data is loaded) an unknown metric, split, domain or
      domain setting, a bad ``beam`` or ``first``, a domain other than the interval domain for
      a Tree-LSTM, or a setting that does not fit the run.
    EvaluationError: CF ≤ EX ≤ HF ≤ Acc fails (per example, over the metrics computed), or
      (``shortcut=False``) an audit failure; the results are in the exception's ``results``
      attribute.
  """
  registered = tuple(metric_registry.REGISTRY)
  unknown = sorted(set(metrics or ()) - set(registered))
  if unknown or (metrics is not None and not metrics):
    raise ConfigError(f"Unknown metrics {unknown or list(metrics)}; choose from {registered}.")
  if split not in SPLITS:
    raise ConfigError(f"Unknown split {split!r}; choose one of {sorted(SPLITS)}.")
  if beam < 1:
    raise ConfigError(f"beam={beam}: HF Acc needs at least one HotFlip candidate per example; "
                      "pass beam >= 1 (--beam, default 5).")
  if first is not None and first < 1:
    raise ConfigError(f"first={first}: evaluate at least one example; pass --first N with N >= 1 "
                      "(or leave it out for the whole split).")
  run = RunDirectory(workdir)
  config = run.config()
  if not (checkpoint == "best" and has_exported_model(run.path)):
    run.require_checkpoint(checkpoint)  # before any data is loaded
  lexicon = {"synonyms": synonyms, "max_candidates": max_candidates}
  if trained_embedding_scale(config) is not None and any(
      v not in (None, config[k]) for k, v in lexicon.items()):
    raise ConfigError(f"The run in {run.path} trained its word vectors on the vocabulary of its "
                      f"lexicon (synonyms={config.synonyms!r}, max_candidates="
                      f"{config.max_candidates}); another lexicon would rebuild the vocabulary "
                      "and misalign them. Evaluate it with its own lexicon (leave out "
                      "--synonyms/--max-candidates).")
  own_lexicon = {k: config[k] for k in lexicon}
  for field, value in (("space", space), *lexicon.items()):
    if value is not None:
      config[field] = value
  if first is not None:
    limit = config[SPLITS[split]]
    config[SPLITS[split]] = first if limit is None else min(first, limit)
  validate(config, training=False)  # imports the run's plugins, which may register domains
  try:
    settings = domains.parse_settings(domain, domain_settings)
    if config.model == TREE.name and domain != domains.DEFAULT:
      raise ValueError(f"The Tree-LSTM DP has rules for the interval domain only, not "
                       f"{domain!r}: evaluate trees with --domain {domains.DEFAULT} (the "
                       "default).")
    abstract = domains.DOMAINS[domain].make(settings)  # may refuse a setting's value
  except ValueError as error:
    raise ConfigError(str(error)) from None
  # The data folder: $ARC_DATA_DIR when set, else the run's own if it is still there.
  recorded = config.data_dir and Path(config.data_dir).is_dir() and not os.environ.get(
      "ARC_DATA_DIR")
  config.data_dir = str(data_folder(config.data_dir if recorded else None))
  logger.info("Evaluating the %s checkpoint of %s; data folder %s.", checkpoint,
              run.path.absolute(), config.data_dir)
  if metrics is None:
    metrics = metric_registry.defaults(config.model)
  available = metric_registry.available(config.model)
  unavailable = sorted(set(metrics) - set(available))
  if unavailable:
    supported = "; ".join(f"{n} supports {', '.join(metric_registry.REGISTRY[n].models)} only"
                          for n in unavailable)
    raise ConfigError(f"Metrics {unavailable} are not available for {config.model!r} models "
                      f"({supported}); choose from {available}.")
  experiment = build_experiment(config, mesh)
  mesh = experiment.mesh
  parallel.check_batch_size(exhaustive_batch_size, mesh, "exhaustive_batch_size")
  # Another lexicon adds its candidate words to the vocabulary (the data's words stay, with the
  # same vectors): a run with frozen vectors is then checked against the data of its own lexicon.
  fingerprint = experiment.data_fingerprint()
  if any(config[k] != v for k, v in own_lexicon.items()):
    fingerprint = data_fingerprint(experiment.family.lowering.prepare_data(
        ml_collections.ConfigDict({**config.to_dict(), **own_lexicon})))
  params, meta = restore_params(run, experiment, checkpoint, fingerprint)
  results: dict[str, Any] = {
      "run": str(run.path), "name": config.name, "model": config.model,
      "checkpoint": {"which": checkpoint, "step": meta["step"],
                     **({"epoch": meta["epoch"]} if "epoch" in meta else {})},
      "split": split, "space": config.space, "synonyms": config.synonyms,
      "max_candidates": config.max_candidates, "first": first, "domain": domain,
      "domain_settings": settings.to_dict(), "examples": len(experiment.splits[split])}
  names = metric_registry.with_needs(metrics)
  journals = {}
  searches = [name for name in PROGRESS_FILES if name in names]
  if resume and searches and jax.process_count() == 1:
    path = results_path(workdir, {**results, "metrics": dict.fromkeys(names)}, shortcut)
    blocked = read_only_part(path)
    if blocked is None:
      key = {"params": digest(*jax.tree.leaves(params)), "data": fingerprint,
             **{k: results[k] for k in ("split", "space", "synonyms", "max_candidates", "first")}}
      journals = {name: Journal(path.with_suffix(PROGRESS_FILES[name]), key) for name in searches}
    else:
      logger.warning("Cannot write to %s (read-only): %s keep no progress file, so a stop "
                     "loses them.", blocked, " and ".join(searches))
  context = metric_registry.Context(
      experiment=experiment, params=params, split=split, flags={}, shortcut=shortcut, beam=beam,
      exhaustive_batch_size=exhaustive_batch_size, exact_max_nodes=exact_max_nodes,
      exact_window_rule=exact_window_rule, progress=progress, journals=journals, domain=abstract)
  sizes = metric_registry.space_sizes(context)
  results.update({key: summary(context) for key, summary in metric_registry.SUMMARIES.items()},
                 space_size=metric_registry.summarize_space_sizes(sizes),
                 devices=mesh.size, metrics={})
  columns: dict[str, np.ndarray] = {}
  for name in names:
    tic = time.perf_counter()
    outcome = metric_registry.REGISTRY[name].compute(context)
    context.flags.update({name: outcome.robust, **outcome.flags})
    columns.update(outcome.columns)
    results["metrics"][name] = _entry(outcome.robust, time.perf_counter() - tic, outcome.extra)
  for journal in journals.values():
    journal.remove()
  results[PER_EXAMPLE] = per_example_table(experiment.examples(split)[1], sizes, context.flags,
                                           columns)
  _check(results, context.flags)
  return results


PER_EXAMPLE = "per_example"
"""The key of :func:`evaluate_run`'s results that holds the per-example table; it is written to
its own file beside the results (:func:`write_results`), not into their JSON."""


def per_example_table(labels, sizes: Sequence[int], flags: dict[str, np.ndarray],
                      columns: dict[str, np.ndarray]) -> dict[str, list]:
  """One row per example, in split order, as columns of JSON values: ``id`` (the index in the
  split), ``label``, ``space_size`` (|S(x)|), the metrics' own values (``prediction``,
  ``clean_margin``, ``cf_margin``: the least margin over j ≠ y, the certificate's lower bound
  over S(x)) and every per-example outcome (``acc``, ``cf``, ``ex``, ``hf``, ``exact`` and the
  metrics' further flags) as 0/1."""
  table = {"id": list(range(len(labels))), "label": [int(y) for y in labels],
           "space_size": [int(k) for k in sizes]}
  for name, values in {**columns, **flags}.items():
    values = np.asarray(values)
    if values.dtype == bool:
      table[name] = values.astype(int).tolist()
    elif np.issubdtype(values.dtype, np.integer):
      table[name] = values.tolist()
    else:  # the shortest decimal that reads back as the same float32 (or float64)
      table[name] = [float(np.format_float_positional(v, unique=True, trim="-")) for v in values]
  return table


def without_table(results: dict[str, Any]) -> dict[str, Any]:
  """The results without their per-example table (what is printed and written as JSON)."""
  return {key: value for key, value in results.items() if key != PER_EXAMPLE}


def _check(results: dict[str, Any], flags: dict[str, np.ndarray]) -> None:
  """Raises EvaluationError unless CF ≤ EX ≤ HF ≤ Acc and no audit failed.

  ``flags`` maps metric names to bool (n,) per-example outcomes. Each metric present is compared
  with the next one present in :data:`ROBUSTNESS_ORDER` per example (an example counted by the
  first must be counted by the second), which implies the order of the counts; each pair of
  :data:`~arc_jax.metrics.EXCLUSIONS` present must not share an example; and no metric's
  ``audit_failures`` may be non-empty.
  """
  present = [name for name in ROBUSTNESS_ORDER if name in flags]
  problems = []
  for refuted, robust, meaning in EXCLUSIONS:
    if refuted in flags and robust in flags:
      broken = np.flatnonzero(flags[refuted] & flags[robust])
      if len(broken):
        problems.append(f"{len(broken)} example(s) {meaning} (first indices "
                        f"{broken[:5].tolist()})")
  for stronger, weaker in zip(present, present[1:]):
    broken = np.flatnonzero(flags[stronger] & ~flags[weaker])
    if len(broken):
      problems.append(
          f"{len(broken)} example(s) pass {stronger} but fail {weaker} ({stronger} "
          f"{int(flags[stronger].sum())}, {weaker} {int(flags[weaker].sum())}; first indices "
          f"{broken[:5].tolist()})")
  for entry in results["metrics"].values():
    failures = entry.get("audit_failures", [])
    if failures:
      problems.append(f"{len(failures)} certified example(s) have a misclassified member "
                      f"(audit failures; first: {failures[0]})")
  if problems:
    error = EvaluationError("Inconsistent robustness numbers: " + "; ".join(problems) + ".")
    error.results = results
    raise error


def results_path(workdir, results: dict[str, Any], shortcut: bool) -> Path:
  """``<workdir>/eval/<split>[_first<N>]_<space>[_<lexicon>][_<domain>][_<metrics>][_audit].json``.

  The space is written with its letters and digits. The metrics are named when ``results``
  holds fewer than its model supports (e.g. ``test_Del2Sub2_hf.json``), an example subset by
  its size (``test_first100_Sub3.json``), and a lexicon that is not the run's own (its
  ``config.json``) by what differs (``test_Sub2_candidates1.json``,
  ``test_Sub2_counterfitted_allcandidates.json``), and a domain other than the default
  interval domain by its name and the settings that differ from its defaults
  (``test_Sub2_linear_step.json``, ``test_Sub2_widened_factor4p0.json``), so an evaluation never
  overwrites another.
  """
  held = [m for m in metric_registry.REGISTRY if m in results["metrics"]]
  partial = ("" if set(held) == set(metric_registry.defaults(results["model"]))
             else "_" + "_".join(held))
  space = re.sub(r"[^A-Za-z0-9]+", "", results["space"])
  subset = "" if results.get("first") is None else f"_first{results['first']}"
  lexicon = ""
  config_file = Path(workdir) / "config.json"
  own = json.loads(config_file.read_text()) if config_file.is_file() else {}
  if results.get("synonyms") != own.get("synonyms", results.get("synonyms")):
    lexicon += f"_{results['synonyms']}"
  candidates = results.get("max_candidates")
  if candidates != own.get("max_candidates", candidates):
    lexicon += "_allcandidates" if candidates == 0 else f"_candidates{candidates}"
  name = (f"{results['split']}{subset}_{space}{lexicon}{_domain_part(results)}{partial}"
          f"{'' if shortcut else '_audit'}.json")
  return Path(workdir) / "eval" / name


def _domain_part(results: dict[str, Any]) -> str:
  """``""`` for the default domain (or results from before domains had names), else
  ``_<domain>[_<field><value>...]`` for the settings that differ from the domain's defaults
  (every setting, for a domain not registered in this process), a value's ``.`` written ``p``
  and its ``-`` ``m`` (``factor=1.5``: ``_factor1p5``)."""
  name = results.get("domain", domains.DEFAULT)
  if name == domains.DEFAULT:
    return ""
  settings = results.get("domain_settings") or {}
  entry = domains.DOMAINS.get(name)
  defaults = entry.settings.defaults().to_dict() if entry and entry.settings else {}
  text = lambda value: re.sub(r"[^A-Za-z0-9]+", "",
                              str(value).replace(".", "p").replace("-", "m"))
  changed = "".join(f"_{field}{text(value)}" for field, value in sorted(settings.items())
                    if field not in defaults or defaults[field] != value)
  return f"_{name}{changed}"


def write_results(results: dict[str, Any], path) -> None:
  """The results as JSON at ``path``; their per-example table (if any) beside it
  (:mod:`arc_jax.per_example`), named in the JSON under ``"per_example_file"``."""
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  table = results.get(PER_EXAMPLE)
  results = without_table(results)
  if table is not None:
    table_file = per_example.path_for(path)
    per_example.write(table, table_file)
    results["per_example_file"] = table_file.name
  path.write_text(json.dumps(results, indent=2) + "\n")
