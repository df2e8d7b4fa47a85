"""Training methods: how each forms its batches and which dev metric picks its best epoch.

The registry is the extension point for new methods: a :class:`Method` with a
``batch_transform`` factory that rewrites each training batch, registered under a name that
configs select with ``config.method``. Data augmentation and HotFlip adversarial training are two
such transforms (each batch of B rows becomes 2B rows, x and one member of S(x), formed by the
experiment's task: ``Task.doubled``, so data augmentation serves sentences and trees alike).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

import numpy as np
from flax import nnx

from arc_jax.data import Batch

if TYPE_CHECKING:
  from arc_jax.train.experiment import Experiment

BatchTransform = Callable[[Batch, int, nnx.State], Batch]
"""``transform(batch, step, params) -> batch to train on`` (host side, before sharding; a batch
of the experiment's task, e.g. ``IndexedTrees`` for trees); ``params`` are the current
(replicated) parameters, for methods that attack the model."""

_AUGMENT_STREAM = 1  # separates the sampling seeds from the data-order seeds (seed, epoch)


@dataclasses.dataclass(frozen=True)
class Method:
  """A training method.

  Attributes:
    certified: trains with ARC's objective while λ > 0 and selects the epoch with the best dev
      certified accuracy; otherwise the clean objective and the best dev accuracy.
    batch_transform: ``factory(experiment) -> BatchTransform``, or None to train on the batches
      as they come.
  """

  certified: bool
  batch_transform: Callable[[Experiment], BatchTransform] | None = None


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
}


def register_method(name: str, method: Method) -> None:
  """Makes ``config.method = name`` train with ``method``."""
  if name in METHODS:
    raise ValueError(f"A training method named {name!r} is already registered.")
  METHODS[name] = method
