"""The :class:`Task` interface: what the trainer and the evaluator do differently per model family.

``train_and_evaluate`` (:mod:`arc_jax.train.run`), ``build_experiment`` and ``evaluate_run``
(:mod:`arc_jax.evaluation`) are written once against this interface; ``config.model`` picks the
implementation (:data:`arc_jax.train.tasks.TASKS`). Everything else, the loop, checkpoints,
run directories, schedules, progress, resumption and the metric files, is shared.

A task's batches are host objects with an ``indices`` array (int (B,), the position of each row
in its split, -1 for padding rows) that the trainer hands, placed by :meth:`Task.put`, to jitted
steps. Its objectives and row functions (:data:`~arc_jax.train.steps.Objective`,
:data:`~arc_jax.train.steps.RowsFn`) report one :class:`~arc_jax.train.steps.RowMetrics` row per
example, so the steps of :mod:`arc_jax.train.steps` and the metric totals are the same for
every family. Objectives are static functions (or memoised factories) so that the memoised steps
compile once per task.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Sequence

import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arc_jax.attacks import ExhaustiveResult, HotFlipResult
from arc_jax.data import ExperimentData
from arc_jax.perturbation.spaces import Signature, Space
from arc_jax.train.steps import Objective, RowsFn

if TYPE_CHECKING:
  from arc_jax.train.experiment import Experiment


def largest_synonym_list(data: ExperimentData) -> int:
  """The most Sub candidates of any word (at least 1): one replacement-slot count for a whole
  dataset, so each batch shape compiles once."""
  return max((len(c) for c in data.synonyms.values()), default=1)


class Task(abc.ABC):
  """A model family (see the module docstring).

  Attributes:
    name: the ``config.model`` value that selects it.
    datasets: the ``config.dataset`` values it trains on.
    unsupported_methods: registered training methods it cannot train with.
    robust_losses: the ``config.robust_loss`` values it supports.
    metrics: the evaluation metrics it supports.
    trainable_embeddings: whether its model can train the word vectors
      (``config.trainable_embeddings``).
  """

  name: ClassVar[str]
  datasets: ClassVar[tuple[str, ...]]
  unsupported_methods: ClassVar[tuple[str, ...]] = ()
  robust_losses: ClassVar[tuple[str, ...]]
  metrics: ClassVar[tuple[str, ...]]
  trainable_embeddings: ClassVar[bool] = False

  @staticmethod
  def check_space(space: Space) -> None:
    """Raises ValueError, naming the fix, if the model cannot be certified under ``space``."""

  # -- building ---------------------------------------------------------------------------

  @abc.abstractmethod
  def prepare_data(self, config: ml_collections.ConfigDict) -> ExperimentData:
    """The data of ``config`` (dataset, synonyms); its splits support ``len`` and ``[:n]``."""

  @abc.abstractmethod
  def space(self, data: ExperimentData, spec: str):
    """The perturbation space ``spec`` of this family, restricted to the vocabulary."""

  @abc.abstractmethod
  def builder(self, data: ExperimentData, space):
    """What lowers examples for the certification DP, with shapes fixed for the whole data."""

  @abc.abstractmethod
  def model(self, config: ml_collections.ConfigDict, data: ExperimentData) -> nnx.Module:
    """The freshly initialised model (seeded by ``config.seed``)."""

  # -- batches ----------------------------------------------------------------------------

  @abc.abstractmethod
  def batches(self, experiment: Experiment, split: str, batch_size: int, *, certify: bool,
              shuffle: bool = False, seed: int = 0, epoch: int = 0, start: int = 0
              ) -> Iterator[Any]:
    """The batches of one epoch of ``split`` from batch number ``start`` on.

    The order is a pure function of (seed, epoch) (:func:`arc_jax.data.batch_order`, pooled by
    size when shuffled, sorted by size otherwise); ``certify``: the batches carry what the DP
    needs.
    """

  @abc.abstractmethod
  def put(self, batch, mesh: Mesh):
    """A host batch as global arrays on ``mesh``, split along its rows."""

  @abc.abstractmethod
  def doubled(self, experiment: Experiment, batch,
              partners: Callable[[list, np.ndarray], Sequence]):
    """A training batch of B rows as 2B rows: its examples x, then ``partners(xs, labels)`` (one
    example per x, in order, with the label of its x)."""

  @staticmethod
  @abc.abstractmethod
  def sample_members(space, examples: list, rng: np.random.Generator) -> list:
    """One random member of S(x) per example (uniform over application choices)."""

  # -- objectives and evaluation functions (pure, jitted by arc_jax.train.steps) ---------

  @staticmethod
  @abc.abstractmethod
  def clean_objective(model, batch, dropout_key, step):
    """The clean :data:`~arc_jax.train.steps.Objective` (normal training, ARC while λ = 0)."""

  @staticmethod
  @abc.abstractmethod
  def arc_objective(signature: Signature, robust_weight, eps, robust_loss: str) -> Objective:
    """ARC's ``(1 − λ(step))·clean + λ(step)·robust`` with hulls scaled by ε(step) (memoised)."""

  @staticmethod
  @abc.abstractmethod
  def classify_rows(model, batch):
    """The :data:`~arc_jax.train.steps.RowsFn` of clean correctness (the ``acc`` metric)."""

  @staticmethod
  @abc.abstractmethod
  def certify_rows(signature: Signature) -> RowsFn:
    """The :data:`~arc_jax.train.steps.RowsFn` of correctness and certificates at ε = 1."""

  # -- evaluation on the host ---------------------------------------------------------------

  @abc.abstractmethod
  def exhaustive(self, experiment: Experiment, params: nnx.State, split: str,
                 certified: np.ndarray, *, shortcut: bool, batch_size: int,
                 progress: bool) -> ExhaustiveResult:
    """EX: enumerate S(x) of the examples of ``split`` (see :mod:`arc_jax.attacks.exhaustive`)."""

  @abc.abstractmethod
  def hotflip(self, experiment: Experiment, params: nnx.State, split: str, *, beam: int,
              batch_size: int, progress: bool) -> HotFlipResult:
    """HF: the HotFlip beam search (``beam`` candidates per example) on ``split``."""

  @abc.abstractmethod
  def adversarial_examples(self, experiment: Experiment, params: nnx.State, examples: list,
                           labels: np.ndarray) -> list:
    """HotFlip adversarial training's partners: the top-1 (beam 1) HotFlip member of S(x) of
    each example, with the current ``params``."""

  @abc.abstractmethod
  def space_sizes(self, experiment: Experiment, split: str) -> list[int]:
    """|S(x)| of every example of ``split``, counted as application choices (``count``)."""

  @abc.abstractmethod
  def empty_examples(self, split_data) -> dict[str, Any]:
    """JSON: the examples left empty by the out-of-vocabulary policy, and the policy."""
