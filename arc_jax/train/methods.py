"""Training methods: how each forms its batches and which dev metric picks its best epoch.

The registry is the extension point for new methods (e.g. HotFlip adversarial training): a
:class:`Method` with a ``batch_transform`` factory that rewrites each training batch, registered
under a name that configs select with ``config.method``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

import numpy as np
from flax import nnx

from arc_jax.attacks import augment_batch
from arc_jax.data import Batch, make_batch

if TYPE_CHECKING:
  from arc_jax.train.experiment import Experiment

BatchTransform = Callable[[Batch, int, nnx.State], Batch]
"""``transform(batch, step, params) -> batch to train on`` (host side, before sharding);
``params`` are the current (replicated) parameters, for methods that attack the model."""

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

  The samples (``arc_jax.attacks.augment_batch``, uniform over application choices) depend on
  (seed, step) only, so a resumed run draws the same ones.
  """
  train = experiment.splits["train"]
  vocab, space, seed = experiment.data.vocab, experiment.space, experiment.config.seed

  def transform(batch: Batch, step: int, params: nnx.State) -> Batch:
    del params
    indices = batch.indices[batch.indices >= 0]
    rows = [train.tokens[i] for i in indices]
    rng = np.random.default_rng([seed, _AUGMENT_STREAM, step])
    sentences = rows + augment_batch(space, rows, rng)
    labels = np.concatenate([train.labels[indices]] * 2)
    return make_batch(sentences, labels, range(len(sentences)), vocab, 2 * len(batch.labels))

  return transform


METHODS: dict[str, Method] = {
    "normal": Method(certified=False),
    "augment": Method(certified=False, batch_transform=random_members),
    "arc": Method(certified=True),
}


def register_method(name: str, method: Method) -> None:
  """Makes ``config.method = name`` train with ``method``."""
  if name in METHODS:
    raise ValueError(f"A training method named {name!r} is already registered.")
  METHODS[name] = method
