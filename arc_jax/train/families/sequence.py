"""LSTM and Bi-LSTM classifiers of token sequences (SST-2, IMDB): the :data:`SEQUENCE` family.

Batches (:class:`~arc_jax.data.Batch`) carry DP plans (:class:`~arc_jax.perturbation.PlanBuilder`)
when certified; one label per sentence.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import chex
import jax
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arc_jax import parallel
from arc_jax.attacks import (ExhaustiveResult, HotFlipResult, Journal, adversarial_examples,
                             augment_batch, exhaustive_robustness, hotflip_robustness)
from arc_jax.certify import Certificate, certify_model
from arc_jax.data import Batch, ExperimentData, TextSplit, make_batch, prepare_lstm_data
from arc_jax.nn import CELLS, LSTMClassifier, predict
from arc_jax.nn.models import POOLINGS
from arc_jax.nn.recurrent import CELL_SETTINGS
from arc_jax.perturbation import PlanBuilder, Space, data_space, on_reachable_grid
from arc_jax.perturbation.spaces import Signature
from arc_jax.settings import Setting, Settings
from arc_jax.train.families.base import (Lowering, ModelFamily, ModelFunctions, Placed, Searches,
                                         largest_synonym_list)
from arc_jax.train.steps import RowMetrics, clean_margins, least_margin


def make_predict_fn(graphdef: nnx.GraphDef, params: nnx.State, rest: nnx.State, mesh: Mesh):
  """``predict_logits(token_ids (B, N), lengths (B,)) -> logits (B, K)``.

  The rows are split over the mesh; the logits are gathered from every host
  (:func:`arc_jax.parallel.gathered`: on one process, the array as it is computed).
  """
  full_graphdef, state = nnx.split(nnx.merge(graphdef, params, rest))
  sharded = parallel.batch_sharded(mesh)

  def predict_logits(token_ids: np.ndarray, lengths: np.ndarray) -> jax.Array | np.ndarray:
    logits = predict(full_graphdef, state, *parallel.put((token_ids, lengths), sharded))
    return parallel.gathered(logits)

  return predict_logits


def prepare_data(config: ml_collections.ConfigDict) -> ExperimentData:
  return prepare_lstm_data(config.dataset, synonyms=config.synonyms,
                           max_candidates=config.max_candidates or None,
                           data_root=config.data_dir)


def make_builder(data: ExperimentData, space: Space, max_dp_shapes: int) -> PlanBuilder:
  """Plans with the largest synonym list's slot count, and at most ``max_dp_shapes`` (width,
  reachable grid) shapes fitted to every split of the data (:meth:`PlanBuilder.bound_shapes`)."""
  slots = largest_synonym_list(data) if "Sub" in space.names else 1
  builder = PlanBuilder(space, data.vocab, min_replacement_slots=slots)
  builder.bound_shapes([s for split in data.splits.values() for s in split.tokens], max_dp_shapes)
  return builder


SETTINGS = Settings("lstm", {
    "bidirectional": Setting(False, "Bi-LSTM instead of LSTM"),
    "cell": Setting("lstm", "the recurrent cell (arc_jax.nn.register_cell adds one)",
                    choices=lambda: CELLS),
    "pooling": Setting("final", "how the states become the features: the last state, their mean "
                       "over positions, or attention over positions", choices=lambda: POOLINGS),
    "projection": Setting(100, "units of the projection layer before the LSTM",
                          valid=(">= 1", lambda v: v >= 1)),
    "head_hidden": Setting(100, "units of the classifier's hidden layer",
                           valid=(">= 1", lambda v: v >= 1)),
})
"""The sequence family's settings (``config.lstm``)."""


def make_model(config: ml_collections.ConfigDict, data: ExperimentData) -> LSTMClassifier:
  c = config.lstm
  cell_block = CELL_SETTINGS.get(c.cell)
  return LSTMClassifier(data.embeddings, hidden=config.hidden, projection=c.projection,
                        head_hidden=c.head_hidden, bidirectional=c.bidirectional,
                        pooling=c.pooling, dropout_rate=config.dropout_rate, cell=c.cell,
                        cell_settings=cell_block and config[cell_block.name].to_dict(),
                        rngs=nnx.Rngs(config.seed))


def examples(split: TextSplit) -> tuple[list, np.ndarray]:
  return split.tokens, np.asarray(split.labels)


def lower(builder: PlanBuilder, sentences: Sequence, labels: Sequence[int],
          indices: Sequence[int], batch_size: int, certify: bool) -> Batch:
  """The batch; with ``certify``, its plan runs the DP on the rows' reachable grid."""
  batch = make_batch(sentences, labels, indices, builder.vocab, batch_size,
                     plan_builder=builder if certify else None)
  if certify:
    batch = dataclasses.replace(
        batch, plan=on_reachable_grid(builder.space, batch.plan, builder.shape_menu))
  return batch


def put(batch: Batch, mesh: Mesh) -> Batch:
  return parallel.put(batch, parallel.batch_sharded(mesh))


def forward(model: LSTMClassifier, batch: Batch, dropout_key) -> jax.Array:
  """Logits (B, K) of the concrete forward pass."""
  chex.assert_rank(batch.token_ids, 2)
  return model(batch.token_ids, batch.lengths, dropout_key)


def certify(model: LSTMClassifier, signature: Signature, batch: Batch, eps, dropout_key,
            domain, **options) -> Certificate:
  """The ARC DP (:func:`arc_jax.certify.certify_model`) on the batch's plans."""
  chex.assert_rank(batch.token_ids, 2)
  return certify_model(model, signature, batch.plan, batch.labels, eps, dropout_key, domain,
                       **options)


def take_rows(batch: Batch, start, size: int) -> Batch:
  """Rows ``start:start + size`` (``start`` may be traced): every array of a batch and of its
  plan is row-major."""
  return jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, start, size), batch)


def targets(batch: Batch) -> tuple[jax.Array, jax.Array]:
  return batch.labels, batch.weights


def rows(batch: Batch, logits: jax.Array, certified: jax.Array | None = None,
         margins: jax.Array | None = None) -> RowMetrics:
  prediction = logits.argmax(axis=-1)
  margins = clean_margins(logits, batch.labels) if margins is None else margins
  return RowMetrics(batch.weights, prediction == batch.labels, certified, prediction,
                    least_margin(margins, batch.labels))


def attack(placed: Placed, space: Space, builder: PlanBuilder, sentences: list,
           labels: np.ndarray, batch_size: int) -> list:
  return adversarial_examples(placed.graphdef, (placed.params, placed.rest), space, sentences,
                              labels, builder.vocab, batch_size=batch_size, mesh=placed.mesh)


def enumerate_space(placed: Placed, space: Space, builder: PlanBuilder, sentences: list,
                    labels: np.ndarray, certified: np.ndarray, *, shortcut: bool,
                    batch_size: int, progress: bool,
                    journal: Journal | None = None) -> ExhaustiveResult:
  return exhaustive_robustness(make_predict_fn(*placed), space, sentences, labels,
                               builder.vocab, certified=certified, shortcut=shortcut,
                               batch_size=batch_size, progress=progress, journal=journal)


def hotflip(placed: Placed, space: Space, builder: PlanBuilder, sentences: list,
            labels: np.ndarray, *, beam: int, batch_size: int, progress: bool) -> HotFlipResult:
  return hotflip_robustness(placed.graphdef, (placed.params, placed.rest), space, sentences,
                            labels, builder.vocab, beam=beam, batch_size=batch_size,
                            progress=progress, mesh=placed.mesh)


def empty_examples(sentences: list) -> dict[str, Any]:
  return {"indices": [i for i, t in enumerate(sentences) if not t],
          "policy": "kept and classified as the empty input; every denominator counts them"}


LOWERING = Lowering(
    prepare_data=prepare_data, make_space=data_space, make_builder=make_builder,
    examples=examples, size=len, lower=lower, put=put, empty_examples=empty_examples,
    group=PlanBuilder.grid_group)
"""Sentences as token batches with their DP plans (shared by every family of token
sequences)."""

SEARCHES = Searches(sample=augment_batch, attack=attack, enumerate=enumerate_space,
                    hotflip=hotflip)
"""Sampling, HotFlip and enumeration over sentences (any model of token batches)."""

SEQUENCE = ModelFamily(
    name="lstm", datasets=("sst2", "imdb"), robust_losses=("worst_case", "max_of_means"),
    lowering=LOWERING,
    model=ModelFunctions(make_model=make_model, forward=forward, certify=certify,
                         targets=targets, rows=rows, take_rows=take_rows),
    searches=SEARCHES, settings=SETTINGS)
"""(Bi-)LSTMs on sentences (``config.model = "lstm"``)."""
