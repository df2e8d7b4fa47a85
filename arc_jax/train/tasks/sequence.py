"""LSTM and Bi-LSTM classifiers of token sequences (SST-2, IMDB): the :class:`SequenceTask`."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import ml_collections
import numpy as np
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from arc_jax.attacks import ExhaustiveResult, augment_batch, exhaustive_robustness
from arc_jax.data import Batch, ExperimentData, iterate_batches, make_batch, prepare_lstm_data
from arc_jax.nn import LSTMClassifier, predict
from arc_jax.perturbation import PlanBuilder, Space
from arc_jax.train import parallel, steps
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


class SequenceTask(Task):
  """(Bi-)LSTM on sentences: :class:`~arc_jax.data.Batch` batches with DP plans
  (:class:`~arc_jax.perturbation.PlanBuilder`), one label per sentence."""

  name = "lstm"
  datasets = ("sst2", "imdb")
  robust_losses = ("worst_case", "max_of_means")
  metrics = ("acc", "cf", "ex", "hf")

  def prepare_data(self, config: ml_collections.ConfigDict) -> ExperimentData:
    return prepare_lstm_data(config.dataset, synonyms=config.synonyms,
                             max_candidates=config.max_candidates or None)

  def space(self, data: ExperimentData, spec: str) -> Space:
    return data.space(spec)

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
  clean_objective = staticmethod(steps.clean_objective)
  arc_objective = staticmethod(steps.arc_objective)
  classify_rows = staticmethod(steps.classify_rows)
  certify_rows = staticmethod(steps.certify_rows)

  def exhaustive(self, experiment, params: nnx.State, split: str, certified: np.ndarray, *,
                 shortcut: bool, batch_size: int, progress: bool) -> ExhaustiveResult:
    data = experiment.splits[split]
    predict_logits = make_predict_fn(experiment.graphdef, params, experiment.rest,
                                     experiment.mesh)
    return exhaustive_robustness(predict_logits, experiment.space, data.tokens, data.labels,
                                 experiment.data.vocab, certified=certified, shortcut=shortcut,
                                 batch_size=batch_size, progress=progress)

  def empty_examples(self, split_data) -> dict[str, Any]:
    return {"indices": [i for i, t in enumerate(split_data.tokens) if not t],
            "policy": "kept and classified as the empty input; every denominator counts them"}
