"""LSTM and Bi-LSTM classifiers of token sequences (SST-2, IMDB): their objectives and the
:class:`SequenceTask`."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from arc_jax import interval, parallel
from arc_jax.attacks import (ExhaustiveResult, HotFlipResult, adversarial_examples, augment_batch,
                             exhaustive_robustness, hotflip_robustness)
from arc_jax.certify import certify_model
from arc_jax.data import Batch, ExperimentData, iterate_batches, make_batch, prepare_lstm_data
from arc_jax.nn import LSTMClassifier, predict
from arc_jax.perturbation import PlanBuilder, Space, data_space
from arc_jax.perturbation.spaces import Signature
from arc_jax.train import losses, steps
from arc_jax.train.tasks.base import Task, largest_synonym_list


def make_predict_fn(graphdef: nnx.GraphDef, params: nnx.State, rest: nnx.State, mesh: Mesh):
  """``predict_logits(token_ids (B, N), lengths (B,)) -> logits (B, K)`` (numpy).

  The rows are split over the mesh; the logits are gathered from every host.
  """
  full_graphdef, state = nnx.split(nnx.merge(graphdef, params, rest))
  sharded = parallel.batch_sharded(mesh)

  def predict_logits(token_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    logits = predict(full_graphdef, state, *parallel.put((token_ids, lengths), sharded))
    return multihost_utils.process_allgather(logits, tiled=True)

  return predict_logits


def _correct(logits: jax.Array, batch: Batch) -> jax.Array:
  return jnp.argmax(logits, axis=-1) == batch.labels


def clean_objective(model: LSTMClassifier, batch: Batch, dropout_key, step):
  """Cross-entropy of the concrete forward pass (normal training, and ARC while λ = 0)."""
  del step
  chex.assert_rank(batch.token_ids, 2)
  logits = model(batch.token_ids, batch.lengths, dropout_key)
  return (losses.cross_entropy(logits, batch.labels, batch.weights),
          steps.RowMetrics(batch.weights, _correct(logits, batch)))


def classify_rows(model: LSTMClassifier, batch: Batch) -> steps.RowMetrics:
  """Correctness of the concrete forward pass without dropout (the acc of an evaluation)."""
  return clean_objective(model, batch, None, None)[1]


@functools.cache
def certify_rows(signature: Signature) -> steps.RowsFn:
  """Correctness and certificate (ε = 1) of every row from one certification pass without
  dropout: its clean logits (DP slot 0) and its certificate."""
  def rows(model: LSTMClassifier, batch: Batch) -> steps.RowMetrics:
    cert = certify_model(model, signature, batch.plan, batch.labels)
    return steps.RowMetrics(batch.weights, _correct(cert.clean_logits, batch), cert.certified)

  return rows


@functools.cache
def arc_objective(signature: Signature, robust_weight: optax.Schedule, eps: optax.Schedule,
                  robust_loss: str) -> steps.Objective:
  """ARC's ``(1 − λ(step))·clean + λ(step)·robust`` with hulls scaled by ε(step).

  Args:
    signature: the space's signature (static).
    robust_weight, eps: schedules of λ and ε.
    robust_loss: a key of :data:`losses.ROBUST_LOSSES`.
  """
  robust_fn = losses.ROBUST_LOSSES[robust_loss]

  def objective(model, batch, dropout_key, step):
    chex.assert_rank(batch.token_ids, 2)
    # Surrogate bounds (no outward rounding): every reported certificate is computed at
    # evaluation, in the sound domain (certify_rows).
    cert = certify_model(model, signature, batch.plan, batch.labels, eps(step), dropout_key,
                         interval.UNROUNDED)
    clean = losses.cross_entropy(cert.clean_logits, batch.labels, batch.weights)
    robust = robust_fn(cert, batch.labels, batch.weights)
    return (losses.arc_loss(clean, robust, robust_weight(step)),
            steps.RowMetrics(batch.weights, _correct(cert.clean_logits, batch), cert.certified))

  return objective


class SequenceTask(Task):
  """(Bi-)LSTM on sentences: :class:`~arc_jax.data.Batch` batches with DP plans
  (:class:`~arc_jax.perturbation.PlanBuilder`), one label per sentence."""

  name = "lstm"
  datasets = ("sst2", "imdb")
  robust_losses = ("worst_case", "max_of_means")
  metrics = ("acc", "cf", "ex", "hf")

  def prepare_data(self, config: ml_collections.ConfigDict) -> ExperimentData:
    return prepare_lstm_data(config.dataset, synonyms=config.synonyms,
                             max_candidates=config.max_candidates or None,
                             data_root=config.data_dir)

  def space(self, data: ExperimentData, spec: str) -> Space:
    return data_space(data, spec)

  def builder(self, data: ExperimentData, space: Space) -> PlanBuilder:
    slots = largest_synonym_list(data) if "Sub" in space.names else 1
    return PlanBuilder(space, data.vocab, min_replacement_slots=slots)

  def model(self, config: ml_collections.ConfigDict, data: ExperimentData) -> LSTMClassifier:
    return LSTMClassifier(data.embeddings, hidden=config.hidden, projection=config.projection,
                          head_hidden=config.head_hidden, bidirectional=config.bidirectional,
                          pooling=config.pooling, dropout_rate=config.dropout_rate,
                          rngs=nnx.Rngs(config.seed))

  def batches(self, experiment, split: str, batch_size: int, *, certify: bool,
              shuffle: bool = False, seed: int = 0, epoch: int = 0, start: int = 0):
    data = experiment.splits[split]
    return iterate_batches(data.tokens, data.labels, experiment.data.vocab, batch_size, seed=seed,
                           epoch=epoch, start=start, shuffle=shuffle,
                           plan_builder=experiment.builder if certify else None)

  def put(self, batch: Batch, mesh: Mesh) -> Batch:
    return parallel.put(batch, parallel.batch_sharded(mesh))

  def doubled(self, experiment, batch: Batch,
              partners: Callable[[list, np.ndarray], Sequence]) -> Batch:
    train = experiment.splits["train"]
    indices = batch.indices[batch.indices >= 0]
    rows = [train.tokens[i] for i in indices]
    labels = train.labels[indices]
    sentences = rows + list(partners(rows, labels))
    return make_batch(sentences, np.concatenate([labels] * 2), range(len(sentences)),
                      experiment.data.vocab, 2 * len(batch.labels))

  sample_members = staticmethod(augment_batch)
  clean_objective = staticmethod(clean_objective)
  arc_objective = staticmethod(arc_objective)
  classify_rows = staticmethod(classify_rows)
  certify_rows = staticmethod(certify_rows)

  def exhaustive(self, experiment, params: nnx.State, split: str, certified: np.ndarray, *,
                 shortcut: bool, batch_size: int, progress: bool) -> ExhaustiveResult:
    data = experiment.splits[split]
    predict_logits = make_predict_fn(experiment.graphdef, params, experiment.rest,
                                     experiment.mesh)
    return exhaustive_robustness(predict_logits, experiment.space, data.tokens, data.labels,
                                 experiment.data.vocab, certified=certified, shortcut=shortcut,
                                 batch_size=batch_size, progress=progress)

  def hotflip(self, experiment, params: nnx.State, split: str, *, beam: int, batch_size: int,
              progress: bool) -> HotFlipResult:
    data = experiment.splits[split]
    return hotflip_robustness(experiment.graphdef, (params, experiment.rest), experiment.space,
                              data.tokens, data.labels, experiment.data.vocab, beam=beam,
                              batch_size=batch_size, progress=progress, mesh=experiment.mesh)

  def adversarial_examples(self, experiment, params: nnx.State, examples: list,
                           labels: np.ndarray) -> list:
    return adversarial_examples(experiment.graphdef, (params, experiment.rest),
                                experiment.space, examples, labels, experiment.data.vocab,
                                batch_size=experiment.config.batch_size, mesh=experiment.mesh)

  def space_sizes(self, experiment, split: str) -> list[int]:
    return [experiment.space.count(x) for x in experiment.splits[split].tokens]

  def empty_examples(self, split_data) -> dict[str, Any]:
    return {"indices": [i for i, t in enumerate(split_data.tokens) if not t],
            "policy": "kept and classified as the empty input; every denominator counts them"}
