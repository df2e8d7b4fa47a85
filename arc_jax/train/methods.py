"""Training methods: each owns its objective, the batches it trains on and the dev metric that
picks its best epoch.

A :class:`Method` composes three small parts, Optax style: an objective factory (the clean
cross-entropy, ARC's, A3T's, ...), a ``batch_transform`` factory that rewrites each training batch
(or None), and a selection metric; registered under a name that configs select with
``config.method``. Data augmentation and HotFlip adversarial training are the clean objective
with a transform (each batch of B rows becomes 2B rows, x and one member of S(x): the model
family's ``sample`` or ``attack`` partners, doubled by :meth:`~arc_jax.train.built.Built.doubled`, so they serve
sentences and trees alike); ARC is its objective on a curriculum; ARC-A3T and A3T
(:mod:`arc_jax.train.augmented`) bring both a transform and an objective.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

import numpy as np
from flax import nnx

from arc_jax.data import Batch
from arc_jax.settings import Settings
from arc_jax.train import augmented, objectives

if TYPE_CHECKING:
  import ml_collections
  import optax

  from arc_jax.train.built import Built
  from arc_jax.train.steps import Objective

BatchTransform = Callable[[Batch, int, nnx.State], Batch]
"""``transform(batch, step, params) -> batch to train on`` (host side, before sharding; a batch
of the experiment's family, e.g. ``IndexedTrees`` for trees); ``params`` are the current
(replicated) parameters, for methods that attack the model."""

_AUGMENT_STREAM = 1  # separates the sampling seeds from the data-order seeds (seed, epoch)


ObjectiveFactory = Callable[["Built", "optax.Schedule", "optax.Schedule"], "Objective"]
"""``factory(experiment, robust_weight, eps) -> Objective``: a method's objective, given the
schedules of λ and ε (both 0 for methods without a curriculum)."""


def clean(experiment: Built, robust_weight: optax.Schedule, eps: optax.Schedule
          ) -> Objective:
  """The clean objective of ``experiment``'s family (λ and ε unused)."""
  del robust_weight, eps
  return objectives.clean_objective(experiment.family)


def arc(experiment: Built, robust_weight: optax.Schedule, eps: optax.Schedule
        ) -> Objective:
  """ARC's objective under ``experiment.space`` (:func:`objectives.arc_objective`)."""
  return objectives.arc_objective(experiment.family, experiment.space.signature, robust_weight,
                                  eps, experiment.config.robust_loss)


@dataclasses.dataclass(frozen=True)
class Method:
  """A training method.

  Attributes:
    objective: the objective's factory.
    batch_transform: ``factory(experiment) -> BatchTransform``, or None to train on the batches
      as they come.
    selection: the dev metric that picks the best epoch, ``"dev_cf_acc"`` (certified accuracy
      under ``config.space``) or ``"dev_acc"``; default the former with a curriculum.
    curriculum: λ and ε follow ARC's curriculum (``config.lambda_*``, ``eps_*``,
      ``ramp_epochs``; else both stay 0), and while λ = 0 the method trains with the clean
      objective on the batches as they come (no transform). Its objective certifies: its own
      batches carry DP plans, unless its transform makes the plans it needs.
    check: ``check(config)`` raises ``ValueError`` naming the fix for settings the method cannot
      train with (called by ``validate`` before a run directory is written; not when a
      trained run is evaluated).
    settings: the method's own config block (``config.<settings.name>``), or None.
  """

  objective: ObjectiveFactory = clean
  batch_transform: Callable[[Built], BatchTransform] | None = None
  selection: str | None = None
  curriculum: bool = False
  check: Callable[[ml_collections.ConfigDict], None] | None = None
  settings: Settings | None = None

  def __post_init__(self):
    if self.selection is None:
      object.__setattr__(self, "selection", "dev_cf_acc" if self.curriculum else "dev_acc")
    if self.selection not in ("dev_cf_acc", "dev_acc"):
      raise ValueError(f"selection={self.selection!r}; choose 'dev_cf_acc' or 'dev_acc'.")


def random_members(experiment: Built) -> BatchTransform:
  """Data augmentation: each batch of B rows becomes 2B rows, x and a random member of S(x).

  The samples (the family's ``sample``: ``arc_jax.attacks.augment_batch`` for sentences,
  ``sample_tree_member`` for trees, uniform over application choices) depend on (seed, step)
  only, so a resumed run draws the same ones.
  """
  sample, space, seed = experiment.family.searches.sample, experiment.space, experiment.config.seed

  def transform(batch, step: int, params: nnx.State):
    del params
    rng = np.random.default_rng([seed, _AUGMENT_STREAM, step])
    return experiment.doubled(batch, lambda rows, labels: sample(space, rows, rng))

  return transform


def hotflip_members(experiment: Built) -> BatchTransform:
  """HotFlip adversarial training: each batch of B rows becomes 2B rows, x and the top-1 HotFlip
  member of S(x) under ``experiment.space`` (the family's ``attack``: beam 1, as the
  original; x itself when no rewrite scores above 0; trees keep their node labels as in data
  augmentation).

  The attack uses the current parameters without dropout (the original's ``model.eval()``) and
  is a function of them, so a resumed run makes the same members.
  """
  attack, e = experiment.family.searches.attack, experiment

  def transform(batch: Batch, step: int, params: nnx.State) -> Batch:
    del step
    return e.doubled(batch, lambda rows, labels: attack(
        e.placed(params), e.space, e.builder, rows, labels, e.config.batch_size))

  return transform


METHODS: dict[str, Method] = {
    "normal": Method(clean),
    "augment": Method(clean, random_members),
    "hotflip": Method(clean, hotflip_members),
    "arc": Method(arc, curriculum=True),
    "arc_a3t": Method(augmented.dp_objective, augmented.member_batches, curriculum=True,
                      check=augmented.check_arc_a3t, settings=augmented.SETTINGS),
    "a3t": Method(augmented.interval_objective, augmented.member_batches, curriculum=True,
                  check=augmented.check_a3t, settings=augmented.SETTINGS),
}


def register_method(name: str, method: Method) -> None:
  """Makes ``config.method = name`` train with ``method``."""
  if name in METHODS:
    raise ValueError(f"A training method named {name!r} is already registered.")
  METHODS[name] = method
