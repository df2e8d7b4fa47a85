"""The robustness metrics of an evaluation (:func:`arc_jax.evaluation.evaluate_run`), one function
each, registered by name in :data:`REGISTRY`.

Every metric is a function ``(Context) -> Outcome``: it reads the run's experiment, parameters,
split and options from the :class:`Context` (and the per-example outcomes of the metrics computed
before it, ``context.flags``) and returns which examples it counts (``robust``), the extra keys
of its results entry and any further per-example flags for the consistency check
(:data:`ROBUSTNESS_ORDER`, :data:`EXCLUSIONS`; an entry's non-empty ``audit_failures`` fails it
too). The evaluator times the call and writes the entry
``{"value", "count", "total", "seconds", **extra}`` under ``results["metrics"][name]``.

Adding a metric is one function here and one :class:`Metric` line in :data:`REGISTRY` (its place
in :data:`ROBUSTNESS_ORDER` or :data:`EXCLUSIONS` when it implies or excludes another);
``--metrics``, the defaults, the availability per model and the results file names follow from
the registry.

The per-split summaries (:data:`SUMMARIES`: ``empty_examples``; and ``space_size``) take the same
:class:`Context` and give a JSON value at the top level of the results; they are always computed.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

import numpy as np
from flax import nnx

from arc_jax import interval, parallel
from arc_jax.attacks import Journal
from arc_jax.data import num_batches
from arc_jax.train.objectives import certify_rows, classify_rows
from arc_jax.train.progress import eval_bar
from arc_jax.train.steps import RowMetrics, RowsFn, evaluate_split, make_eval_step
from arc_jax.verify import DEFAULT_WINDOW_RULE, NOT_ROBUST, UNKNOWN, verify

if TYPE_CHECKING:
  from arc_jax.domain import Domain
  from arc_jax.train.experiment import Experiment
  from arc_jax.train.families import ModelFamily


@dataclasses.dataclass(frozen=True)
class Context:
  """What every metric sees: the run, the split and the evaluation's options.

  Attributes:
    experiment: the run's data, model and model family (:func:`arc_jax.train.build_experiment`).
    params: the restored parameters.
    split: ``"train"``, ``"validation"`` or ``"test"``.
    flags: bool (n,) per-example outcomes of the metrics computed so far, by name (filled in by
      the evaluator in :data:`REGISTRY` order, so a metric sees those it ``needs``).
    shortcut: ``ex`` trusts certificates (False: enumerates and audits them).
    beam: HotFlip beam width of ``hf``.
    exhaustive_batch_size: rows per predictor call in ``ex``.
    exact_max_nodes: sub-spaces ``exact`` may certify per example before it gives up.
    exact_window_rule: where ``exact`` splits an uncertified sub-space
      (:data:`arc_jax.verify.verifier.WINDOW_RULES`).
    progress: progress bars.
    journals: metric name → where that metric (``ex``, ``exact``) keeps the examples it has
      decided, and resumes from (:mod:`arc_jax.attacks.journal`); a metric without one keeps
      nothing.
    domain: the abstract domain ``cf`` and ``exact`` certify with (default the sound intervals,
      :data:`arc_jax.interval.SOUND`; :func:`arc_jax.domains.make_domain` makes one by name).
  """
  experiment: Experiment
  params: nnx.State
  split: str
  flags: dict[str, np.ndarray]
  shortcut: bool = True
  beam: int = 5
  exhaustive_batch_size: int = 256
  exact_max_nodes: int = 4096
  exact_window_rule: str = DEFAULT_WINDOW_RULE
  progress: bool = True
  journals: dict[str, Journal] = dataclasses.field(default_factory=dict)
  domain: Domain = interval.SOUND


class Outcome(NamedTuple):
  """A metric's result: ``robust`` bool (n,) (the examples it counts), ``extra`` keys of its
  results entry (a ``"seconds"`` here replaces the evaluator's timing), ``flags`` further bool
  (n,) outcomes for :data:`ROBUSTNESS_ORDER`'s check, ``columns`` further per-example values
  (n,) for the per-example table (:func:`arc_jax.evaluation.per_example_table`)."""
  robust: np.ndarray
  extra: dict[str, Any] = {}
  flags: dict[str, np.ndarray] = {}
  columns: dict[str, np.ndarray] = {}


@dataclasses.dataclass(frozen=True)
class Metric:
  """A registered metric.

  Attributes:
    compute: the function.
    needs: metrics computed (and reported) before it whenever it is asked for.
    models: the ``config.model`` values it supports (None: every model).
    default: computed when no metrics are named (else only when asked for).
  """
  compute: Callable[[Context], Outcome]
  needs: tuple[str, ...] = ()
  models: tuple[str, ...] | None = None
  default: bool = True


def _row_flags(context: Context, rows_fn: RowsFn, certify: bool,
               name: str) -> dict[str, np.ndarray]:
  """The jitted ``rows_fn`` over the split in eval batches: (n,) per key of its output."""
  experiment, split = context.experiment, context.split
  size = experiment.config.eval_batch_size
  n = len(experiment.splits[split])
  batches = experiment.batches(split, size, certify=certify)
  return evaluate_split(make_eval_step(experiment.graphdef, rows_fn, experiment.mesh),
                        context.params, experiment.rest, batches, n, experiment.put,
                        bar=eval_bar(num_batches(n, size), f"{name} {split}", context.progress),
                        workers=parallel.concurrent_calls(experiment.mesh))


def accuracy(context: Context) -> Outcome:
  """``acc``: the clean prediction (concrete forward pass) equals the label; per example also
  the prediction and the clean margin (least logit_y − logit_j, j ≠ y)."""
  rows = _row_flags(context, classify_rows(context.experiment.family), False, "acc")
  return Outcome(rows["correct"], columns={"prediction": rows["prediction"],
                                           "clean_margin": rows["margin"]})


@functools.cache
def certify_rows_in(family: ModelFamily, signature, domain: Domain) -> RowsFn:
  """:func:`arc_jax.train.objectives.certify_rows` (ε = 1, no dropout) with the DP in
  ``domain`` instead of the sound intervals."""
  def rows(model, batch) -> RowMetrics:
    cert = family.model.certify(model, signature, batch, 1.0, None, domain)
    return family.model.rows(batch, cert.clean_logits, cert.certified, cert.margins)

  return rows


def certified(context: Context) -> Outcome:
  """``cf``: certified by the ARC DP in ``context.domain``: no string of S(x) changes the
  prediction away from y. In the sound intervals (the default) the rows are training's own
  (:func:`~arc_jax.train.objectives.certify_rows`), so evaluation and training certify alike."""
  experiment = context.experiment
  signature = experiment.space.signature
  rows_fn = (certify_rows(experiment.family, signature) if context.domain == interval.SOUND
             else certify_rows_in(experiment.family, signature, context.domain))
  rows = _row_flags(context, rows_fn, True, "cf")
  return Outcome(rows["certified"], columns={"cf_margin": rows["margin"]})


def exhaustive(context: Context) -> Outcome:
  """``ex``: every string of S(x) is classified y (:mod:`arc_jax.attacks.exhaustive`);
  certified examples (``cf``) count without enumeration unless ``shortcut=False``, which
  enumerates them too and lists every certified example with a misclassified member. With a
  journal (``context.journals["ex"]``) a search stopped before the end resumes where it stopped
  (``resumed``: the examples taken from it; ``seconds`` include the earlier parts)."""
  experiment = context.experiment
  ex = experiment.family.searches.enumerate(experiment.placed(context.params), experiment.space,
                                   experiment.builder, *experiment.examples(context.split),
                                   context.flags["cf"], shortcut=context.shortcut,
                                   batch_size=context.exhaustive_batch_size,
                                   progress=context.progress,
                                   journal=context.journals.get("ex"))
  summary = ex.summary()
  return Outcome(ex.robust, {"seconds": ex.seconds, "shortcut": context.shortcut,
                             "resumed": ex.resumed,
                             "enumerated": summary["num_enumerated"],
                             "members_evaluated": summary["members_evaluated"],
                             "audit_failures": summary["audit_failures"]})


def hotflip(context: Context) -> Outcome:
  """``hf``: x and the ``beam`` strings of a HotFlip beam search in S(x) are all classified y
  (:func:`arc_jax.attacks.hotflip_robustness`); ``eval_batch_size`` examples search together."""
  experiment = context.experiment
  hf = experiment.family.searches.hotflip(experiment.placed(context.params), experiment.space,
                                 experiment.builder, *experiment.examples(context.split),
                                 beam=context.beam, batch_size=experiment.config.eval_batch_size,
                                 progress=context.progress)
  return Outcome(hf.robust, {
      "beam": context.beam,
      "counterexamples_found": sum(c is not None for c in hf.counterexamples),
      "candidates_evaluated": hf.summary()["candidates_evaluated"]})


def exact(context: Context) -> Outcome:
  """``exact`` (token sequences): the complete verifier (:mod:`arc_jax.verify`): proved robust
  by a tree of certified sub-spaces, each certified in ``context.domain``; counts proofs,
  counterexamples and unknowns (budget ``exact_max_nodes`` per example). Its counterexamples
  (``exact_refuted``) must fail ``ex``. With a journal (``context.journals["exact"]``) a
  verification stopped before the end resumes with the verdicts it had reached."""
  experiment = context.experiment
  data = experiment.splits[context.split]
  verdicts = verify(experiment.model(context.params), experiment.space, data.tokens,
                    data.labels, experiment.data.vocab,
                    max_nodes=context.exact_max_nodes, window_rule=context.exact_window_rule,
                    min_replacement_slots=experiment.builder.min_replacement_slots,
                    domain=context.domain, journal=context.journals.get("exact"))
  summary = verdicts.summary()
  return Outcome(verdicts.robust, {
      "seconds": summary.pop("seconds"), **summary, "max_nodes": context.exact_max_nodes,
      "window_rule": context.exact_window_rule,
      "unknown_indices": np.flatnonzero(verdicts.flags(UNKNOWN)).tolist()},
      {"exact_refuted": verdicts.flags(NOT_ROBUST)})


REGISTRY: dict[str, Metric] = {
    "acc": Metric(accuracy),
    "cf": Metric(certified),
    "ex": Metric(exhaustive, needs=("cf",)),
    "hf": Metric(hotflip),
    "exact": Metric(exact, models=("lstm",), default=False),
}
"""Every metric by name, in the order they are computed and reported."""

METRICS = tuple(REGISTRY)

ROBUSTNESS_ORDER = ("cf", "exact", "ex", "hf", "acc")
"""Per example, each metric implies the next: certified ⇒ proved ⇒ EX-robust ⇒ HF-robust ⇒
correct."""

EXCLUSIONS = (("exact_refuted", "ex", "refuted by exact are EX-robust"),)
"""(flag, metric, what a violation means): per example, the flag excludes the metric (a
counterexample of ``exact`` is one of ``ex``'s)."""


def available(model: str) -> tuple[str, ...]:
  """The metrics a ``config.model`` supports."""
  return tuple(n for n, m in REGISTRY.items() if m.models is None or model in m.models)


def defaults(model: str) -> tuple[str, ...]:
  """The metrics computed for a ``config.model`` when none are named."""
  return tuple(n for n in available(model) if REGISTRY[n].default)


def with_needs(names: Sequence[str]) -> tuple[str, ...]:
  """``names`` and the metrics they need, in :data:`REGISTRY` order."""
  wanted = set(names)
  for name in names:
    wanted.update(REGISTRY[name].needs)
  return tuple(n for n in REGISTRY if n in wanted)


def summarize_space_sizes(sizes: Sequence[int]) -> dict[str, Any]:
  """Max, median and mean of |S(x)| (application choices) over the split; ``max`` exact (an int,
  possibly beyond 2^63), median and mean as floats."""
  return {"max": max(sizes), "median": float(statistics.median(sizes)),
          "mean": float(statistics.fmean(sizes)), "counts": "application choices"}


def space_sizes(context: Context) -> list[int]:
  """The split's |S(x)| per example (``Space.count`` / ``TreeSpace.count``, exact integers)."""
  experiment = context.experiment
  examples, _ = experiment.examples(context.split)
  return [experiment.space.count(x) for x in examples]


def empty_examples(context: Context) -> dict[str, Any]:
  """``empty_examples``: the sentences left empty by the out-of-vocabulary policy (classified
  as the empty input, S(x) = {x}), and the policy."""
  experiment = context.experiment
  return experiment.family.lowering.empty_examples(experiment.examples(context.split)[0])


SUMMARIES: dict[str, Callable[[Context], Any]] = {
    "empty_examples": empty_examples,
}
"""The per-split summaries, by their key at the top level of the results (besides
``space_size``, :func:`summarize_space_sizes` of :func:`space_sizes`, which the per-example
table holds too)."""
