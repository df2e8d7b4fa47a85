"""What a config builds: the data splits, the space, the plan builder, the model and the mesh."""

from __future__ import annotations

import dataclasses
import hashlib

import jax
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arc_jax.data import ExperimentData, TextSplit, prepare_lstm_data
from arc_jax.data.paths import cache_dir
from arc_jax.nn import LSTMClassifier
from arc_jax.perturbation import PlanBuilder, Space
from arc_jax.train import parallel

SPLITS = {"train": "num_train", "validation": "num_dev", "test": "num_test"}
"""Split name → the config field that limits it to its first examples."""


@dataclasses.dataclass(frozen=True)
class Experiment:
  """A config, built.

  Attributes:
    config: the config.
    data: the prepared data (vocabulary, embeddings, full splits).
    splits: split name → the split limited by ``num_train`` / ``num_dev`` / ``num_test``.
    space: ``config.space`` restricted to the vocabulary.
    plan_builder: DP plans of ``space``, with one replacement-slot count for the whole data
      (the largest synonym list), so each length bucket compiles once.
    graphdef, params, rest: ``nnx.split(model, nnx.Param, ...)`` of the freshly initialised
      model, ``params`` and ``rest`` (the frozen embeddings) replicated on ``mesh``.
    mesh: the data-parallel mesh.
  """

  config: ml_collections.ConfigDict
  data: ExperimentData
  splits: dict[str, TextSplit]
  space: Space
  plan_builder: PlanBuilder
  graphdef: nnx.GraphDef
  params: nnx.State
  rest: nnx.State
  mesh: Mesh

  def data_fingerprint(self) -> dict:
    """Identifies the vocabulary and embeddings, which checkpoints do not store."""
    return {"vocab_size": len(self.data.vocab) + 1,
            "embeddings_sha1": hashlib.sha1(np.ascontiguousarray(self.data.embeddings)).hexdigest()}


def use_compilation_cache() -> None:
  """Keeps XLA compilations on disk (``<arc_jax cache>/jax``) for the next process.

  The ARC step compiles once per length bucket (tens of seconds each on CPU); with the cache a
  resumed run or an evaluation starts without recompiling.
  """
  jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "jax"))


def _head(split: TextSplit, n: int | None) -> TextSplit:
  if n is None:
    return split
  return TextSplit(split.tokens[:n], split.labels[:n], split.source_indices[:n])


def build_experiment(config: ml_collections.ConfigDict, mesh: Mesh | None = None) -> Experiment:
  """Prepares the data and initialises the model of ``config`` (seeded by ``config.seed``).

  Args:
    config: a training config (see :func:`arc_jax.train.default_config`).
    mesh: the data mesh; default all devices (:func:`parallel.data_mesh`).
  """
  mesh = parallel.data_mesh() if mesh is None else mesh
  parallel.check_batch_size(config.batch_size, mesh)
  parallel.check_batch_size(config.eval_batch_size, mesh, "eval_batch_size")
  data = prepare_lstm_data(config.dataset, synonyms=config.synonyms,
                           max_candidates=config.max_candidates or None)
  splits = {name: _head(data.splits[name], config[field]) for name, field in SPLITS.items()}
  for name, split in splits.items():
    if not split.tokens:
      raise ValueError(f"The {name} split is empty; raise config.{SPLITS[name]}.")
  space = data.space(config.space)
  slots = max((len(c) for c in data.synonyms.values()), default=1) if "Sub" in space.names else 1
  model = LSTMClassifier(data.embeddings, hidden=config.hidden, projection=config.projection,
                         head_hidden=config.head_hidden, bidirectional=config.bidirectional,
                         pooling=config.pooling, dropout_rate=config.dropout_rate,
                         rngs=nnx.Rngs(config.seed))
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  replicated = parallel.replicated(mesh)
  return Experiment(config, data, splits, space,
                    PlanBuilder(space, data.vocab, min_replacement_slots=slots), graphdef,
                    parallel.put(params, replicated), parallel.put(rest, replicated), mesh)
