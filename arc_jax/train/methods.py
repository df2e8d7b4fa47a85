"""Training methods: how each forms its batches, its certified objective and which dev metric
picks its best epoch.

The registry is the extension point for new methods: a :class:`Method` with a
``batch_transform`` factory that rewrites each training batch and, for certified methods, an
``objective`` factory, registered under a name that configs select with ``config.method``. Data
augmentation and HotFlip adversarial training are two such transforms (each batch of B rows
becomes 2B rows, x and one member of S(x), formed by the experiment's task: ``Task.doubled``, so
data augmentation serves sentences and trees alike); ARC-A3T and A3T
(:mod:`arc_jax.train.augmented`) bring both a transform and an objective.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

import numpy as np
from flax import nnx

from arc_jax.data import Batch
from arc_jax.train import augmented

if TYPE_CHECKING:
  import ml_collections
  import optax

  from arc_jax.train.experiment import Experiment
  from arc_jax.train.steps import Objective

BatchTransform = Callable[[Batch, int, nnx.State], Batch]
"""``transform(batch, step, params) -> batch to train on`` (host side, before sharding; a batch
of the experiment's task, e.g. ``IndexedTrees`` for trees); ``params`` are the current
(replicated) parameters, for methods that attack the model."""

_AUGMENT_STREAM = 1  # separates the sampling seeds from the data-order seeds (seed, epoch)


ObjectiveFactory = Callable[["Experiment", "optax.Schedule", "optax.Schedule"], "Objective"]
"""``factory(experiment, robust_weight, eps) -> Objective``: a certified method's objective,
given the schedules of λ and ε."""


def arc_objective(experiment: Experiment, robust_weight: optax.Schedule, eps: optax.Schedule
                  ) -> Objective:
  """ARC's objective under ``experiment.space`` (the task's ``arc_objective``)."""
  return experiment.task.arc_objective(experiment.space.signature, robust_weight, eps,
                                       experiment.config.robust_loss)


@dataclasses.dataclass(frozen=True)
class Method:
  """A training method.

  Attributes:
    certified: trains with ``objective`` while λ > 0 (the clean objective before), with λ and ε
      ramped by the curriculum; otherwise the clean objective throughout.
    batch_transform: ``factory(experiment) -> BatchTransform``, or None to train on the batches
      as they come. A certified method's transform forms the batches of its objective: it runs
      only while λ > 0, on batches without DP plans (it makes the plans it needs).
    objective: the certified objective's factory (default: ARC's).
    selection: the dev metric that picks the best epoch, ``"dev_cf_acc"`` (certified accuracy
      under ``config.space``) or ``"dev_acc"``; default the former for certified methods.
    check: ``check(config)`` raises ``ValueError`` naming the fix for settings the method cannot
      train with (called by ``validate`` before a run directory is written; not when a
      trained run is evaluated).
  """

  certified: bool
  batch_transform: Callable[[Experiment], BatchTransform] | None = None
  objective: ObjectiveFactory = arc_objective
  selection: str | None = None
  check: Callable[[ml_collections.ConfigDict], None] | None = None

  def __post_init__(self):
    if self.selection is None:
      object.__setattr__(self, "selection", "dev_cf_acc" if self.certified else "dev_acc")
    if self.selection not in ("dev_cf_acc", "dev_acc"):
      raise ValueError(f"selection={self.selection!r}; choose 'dev_cf_acc' or 'dev_acc'.")


def random_members(experiment: Experiment) -> BatchTransform:
  """Data augmentation: each batch of B rows becomes 2B rows, x and a random member of S(x).

  The samples (``Task.sample_members``: ``arc_jax.attacks.augment_batch`` for sentences,
  ``sample_tree_member`` for trees, uniform over application choices) depend on (seed, step)
  only, so a resumed run draws the same ones.
  """
  task, space, seed = experiment.task, experiment.space, experiment.config.seed

  def transform(batch, step: int, params: nnx.State):
    del params
    rng = np.random.default_rng([seed, _AUGMENT_STREAM, step])
    return task.doubled(experiment, batch,
                        lambda rows, labels: task.sample_members(space, rows, rng))

  return transform


def hotflip_members(experiment: Experiment) -> BatchTransform:
  """HotFlip adversarial training: each batch of B rows becomes 2B rows, x and the top-1 HotFlip
  member of S(x) under ``experiment.space`` (``Task.adversarial_examples``: beam 1, as the
  original; x itself when no rewrite scores above 0; trees keep their node labels as in data
  augmentation).

  The attack uses the current parameters without dropout (the original's ``model.eval()``) and
  is a function of them, so a resumed run makes the same members.
  """
  task = experiment.task

  def transform(batch: Batch, step: int, params: nnx.State) -> Batch:
    del step
    return task.doubled(experiment, batch, lambda rows, labels: task.adversarial_examples(
        experiment, params, rows, labels))

  return transform


METHODS: dict[str, Method] = {
    "normal": Method(certified=False),
    "augment": Method(certified=False, batch_transform=random_members),
    "hotflip": Method(certified=False, batch_transform=hotflip_members),
    "arc": Method(certified=True),
    "arc_a3t": Method(certified=True, batch_transform=augmented.member_batches,
                      objective=augmented.dp_objective, check=augmented.check_arc_a3t),
    "a3t": Method(certified=True, batch_transform=augmented.member_batches,
                  objective=augmented.interval_objective, check=augmented.check_a3t),
}


def register_method(name: str, method: Method) -> None:
  """Makes ``config.method = name`` train with ``method``."""
  if name in METHODS:
    raise ValueError(f"A training method named {name!r} is already registered.")
  METHODS[name] = method
