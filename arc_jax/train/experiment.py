"""What a config builds: its task, the data splits, the space, the DP lowering, the model and the
mesh."""

from __future__ import annotations

import dataclasses
import hashlib

import jax
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arc_jax import parallel
from arc_jax.data import ExperimentData, TextSplit, Tree
from arc_jax.data.paths import cache_dir
from arc_jax.perturbation import PlanBuilder, Space
from arc_jax.perturbation.trees import TreeBatchBuilder, TreeSpace
from arc_jax.train.config import ConfigError
from arc_jax.train.tasks import TASKS, Task

SPLITS = {"train": "num_train", "validation": "num_dev", "test": "num_test"}
"""Split name → the config field that limits it to its first examples."""


@dataclasses.dataclass(frozen=True)
class Experiment:
  """A config, built.

  Attributes:
    config: the config.
    task: the model family of ``config.model`` (:mod:`arc_jax.train.tasks`).
    data: the prepared data (vocabulary, embeddings, full splits).
    splits: split name → the split (sentences, or a list of trees) limited by ``num_train`` /
      ``num_dev`` / ``num_test``.
    space: ``config.space`` restricted to the vocabulary (a tree space for Tree-LSTMs).
    builder: lowers examples for the DP with one shape per size bucket for the whole data (DP
      plans of sentences with the largest synonym list's slot count; trees padded to one node
      count), so each bucket compiles once.
    graphdef, params, rest: ``nnx.split(model, nnx.Param, ...)`` of the freshly initialised
      model, ``params`` and ``rest`` (the frozen embeddings) replicated on ``mesh``.
    mesh: the data-parallel mesh.
  """

  config: ml_collections.ConfigDict
  task: Task
  data: ExperimentData
  splits: dict[str, TextSplit | list[Tree]]
  space: Space | TreeSpace
  builder: PlanBuilder | TreeBatchBuilder
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


def build_experiment(config: ml_collections.ConfigDict, mesh: Mesh | None = None) -> Experiment:
  """Prepares the data and initialises the model of ``config`` (seeded by ``config.seed``).

  Args:
    config: a training config (see :func:`arc_jax.train.default_config`); ``config.model``
      picks the task.
    mesh: the data mesh; default all devices (:func:`parallel.data_mesh`).
  """
  mesh = parallel.data_mesh() if mesh is None else mesh
  try:
    parallel.check_batch_size(config.batch_size, mesh)
    parallel.check_batch_size(config.eval_batch_size, mesh, "eval_batch_size")
  except ValueError as error:
    raise ConfigError(str(error)) from None
  task = TASKS[config.model]
  data = task.prepare_data(config)
  splits = {name: data.splits[name][:config[field]] for name, field in SPLITS.items()}
  for name, split in splits.items():
    if not len(split):
      raise ConfigError(f"The {name} split is empty; raise config.{SPLITS[name]}.")
  space = task.space(data, config.space)
  graphdef, params, rest = nnx.split(task.model(config, data), nnx.Param, ...)
  replicated = parallel.replicated(mesh)
  return Experiment(config, task, data, splits, space, task.builder(data, space), graphdef,
                    parallel.put(params, replicated), parallel.put(rest, replicated), mesh)
