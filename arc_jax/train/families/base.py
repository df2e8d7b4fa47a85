"""A model family: the bundle of pure functions that the trainer and the evaluator call.

``train_and_evaluate`` (:mod:`arc_jax.train.run`), the objectives (:mod:`arc_jax.train.objectives`),
``build_experiment`` (:mod:`arc_jax.train.experiment`) and the metrics (:mod:`arc_jax.metrics`)
are written once against :class:`ModelFamily`; ``config.model`` picks the family
(:data:`arc_jax.train.families.FAMILIES`). Everything else, the loop, checkpoints, run
directories, schedules, progress, resumption and the metric files, is shared.

A family has three parts. Its :class:`Lowering` turns data into batches on the host: host objects
with an ``indices`` array (int (B,), the position of each row in its split, -1 for padding rows)
that the trainer hands, placed by ``put``, to jitted steps. Its :class:`ModelFunctions`
(``forward``, ``certify``, ``targets``, ``rows``) are pure and traced inside those steps. Its
:class:`Searches` (``sample``, ``attack``, ``enumerate``, ``hotflip``) run on the host. Every
function takes what it needs as arguments, so a family depends on no experiment type.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arc_jax.data import ExperimentData
from arc_jax.settings import Settings


class Placed(NamedTuple):
  """A model as the host-side searches run it: ``nnx.split(model, nnx.Param, ...)`` with its
  states placed on ``mesh`` (searches split their rows over it)."""

  graphdef: nnx.GraphDef
  params: nnx.State
  rest: nnx.State
  mesh: Mesh


def largest_synonym_list(data: ExperimentData) -> int:
  """The most Sub candidates of any word (at least 1): one replacement-slot count for a whole
  dataset, so each batch shape compiles once."""
  return max((len(c) for c in data.synonyms.values()), default=1)


def _accepts_every_space(space) -> None:
  del space


@dataclasses.dataclass(frozen=True)
class Lowering:
  """What turns a family's data into batches, on the host, before any jitted step.

  Attributes:
    prepare_data: ``(config) -> ExperimentData``, the data of ``config``; its splits support
      ``len`` and ``[:n]``.
    make_space: ``(data, spec) -> space``, the perturbation space ``spec`` of this family,
      restricted to the vocabulary.
    make_builder: ``(data, space, max_dp_shapes) -> builder``, what lowers examples for the
      DP, with shapes fixed for the whole data (its ``vocab`` is the data's), at most
      ``max_dp_shapes`` DP shapes where the family's grids vary by batch (0: no bound).
    examples: ``(split) -> (examples, labels)``, a split's examples (a list) and their int
      labels (n,).
    size: ``(example) -> int``, what batches are sorted and pooled by (``batch_order``).
    lower: ``(builder, examples, labels, indices, batch_size, certify) -> batch``, rows
      ``indices`` of ``examples`` as one batch of ``batch_size`` rows; ``certify``: with what
      the DP needs.
    put: ``(batch, mesh) -> batch``, a host batch as global arrays on ``mesh``, split along
      its rows.
    empty_examples: ``(examples) -> dict``, JSON: the examples left empty by the
      out-of-vocabulary policy, and the policy.
    tokens: ``(example) -> tuple[str, ...]``, its words (a tree's leaves, left to right), which
      the data checks count the space's rewrites on (``arc_jax.train.experiment.check_data``).
    check_space: ``(space) -> None``, raises ValueError, naming the fix, if the model cannot
      be certified under a (string) space.
    group: optional ``(builder, example) -> tuple[int, ...]``, sorted before the size when
      batches carry DP input: rows of one batch then mostly share it (sequences: the length
      bucket and the reachable budgets, so the DP runs on a smaller grid).
  """

  prepare_data: Callable[[ml_collections.ConfigDict], ExperimentData]
  make_space: Callable[[ExperimentData, str], Any]
  make_builder: Callable[[ExperimentData, Any, int], Any]
  examples: Callable[[Any], tuple[list, np.ndarray]]
  size: Callable[[Any], int]
  lower: Callable[..., Any]
  put: Callable[[Any, Mesh], Any]
  empty_examples: Callable[[Any], dict[str, Any]]
  tokens: Callable[[Any], tuple[str, ...]] = tuple
  check_space: Callable[[Any], None] = _accepts_every_space
  group: Callable[[Any, Any], tuple[int, ...]] | None = None


@dataclasses.dataclass(frozen=True)
class ModelFunctions:
  """The family's model and the pure functions of it that jitted steps trace.

  Attributes:
    make_model: ``(config, data) -> nnx.Module``, freshly initialised (seeded by
      ``config.seed``).
    forward: ``(model, batch, dropout_key) -> logits``, the concrete forward pass, (B, K) or
      (B, N, K) per node; no dropout when the key is None.
    certify: ``(model, signature, batch, eps, dropout_key, domain, **options) -> Certificate``
      (:func:`arc_jax.certify.certify_model` on the batch's DP input).
    targets: ``(batch) -> (labels, weights)`` of the losses, shaped as the logits without
      their class axis (weight 0: not counted).
    rows: ``(batch, logits, certified=None, margins=None) -> RowMetrics``, per-example
      outcomes of the logits (and of the certificate's ``certified`` and ``margins``).
    take_rows: optional ``(batch, start, size) -> batch``, rows ``start:start + size`` of a
      placed batch, traced inside jitted steps (``start`` may be traced, ``size`` is static):
      a train step may then compute its gradient on parts of a batch in concurrent calls
      (:func:`arc_jax.train.steps.make_train_step`). None keeps batches whole (tree batches
      share one merge schedule).
  """

  make_model: Callable[[ml_collections.ConfigDict, ExperimentData], nnx.Module]
  forward: Callable[..., Any]
  certify: Callable[..., Any]
  targets: Callable[[Any], tuple[Any, Any]]
  rows: Callable[..., Any]
  take_rows: Callable[[Any, Any, int], Any] | None = None


@dataclasses.dataclass(frozen=True)
class Searches:
  """The searches over S(x) that run on the host with a placed model (:class:`Placed`).

  Attributes:
    sample: ``(space, examples, rng) -> members``, one random member of S(x) per example
      (uniform over application choices).
    attack: ``(placed, space, builder, examples, labels, batch_size) -> members``, the top-1
      (beam 1) HotFlip member of S(x) of each example (HotFlip adversarial training).
    enumerate: ``(placed, space, builder, examples, labels, certified, *, shortcut,
      batch_size, progress, journal=None) -> ExhaustiveResult``, EX
      (:mod:`arc_jax.attacks.exhaustive`; ``journal`` keeps its progress,
      :mod:`arc_jax.attacks.journal`).
    hotflip: ``(placed, space, builder, examples, labels, *, beam, batch_size, progress) ->
      HotFlipResult``, HF.
  """

  sample: Callable[..., list]
  attack: Callable[..., list]
  enumerate: Callable[..., Any]
  hotflip: Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class ModelFamily:
  """A model family (see the module docstring): its data lowering, its traced model functions
  and its host searches, three parts that families may share (the CNN reads the sequence
  family's batches, so it shares its :class:`Lowering` and :class:`Searches`). Hashable, so
  memoised objectives and steps compile once per family.

  Attributes:
    name: the ``config.model`` value that selects it.
    datasets: the ``config.dataset`` values it trains on.
    robust_losses: the ``config.robust_loss`` values (keys of
      :data:`arc_jax.train.losses.ROBUST_LOSSES`) it supports.
    lowering: how its data becomes batches.
    model: its model and the functions jitted steps trace.
    searches: its host-side searches (sampling, HotFlip, enumeration).
    unsupported_methods: registered training methods it cannot train with.
    settings: the family's own config block (``config.<settings.name>``, read by its
      ``make_model`` and ``prepare_data``), or None.
  """

  name: str
  datasets: tuple[str, ...]
  robust_losses: tuple[str, ...]
  lowering: Lowering
  model: ModelFunctions
  searches: Searches
  unsupported_methods: tuple[str, ...] = ()
  settings: Settings | None = None
