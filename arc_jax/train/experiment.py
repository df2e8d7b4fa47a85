"""What a config builds: its model family, the data splits, the space, the DP lowering, the model
and the mesh; and the family's functions applied to them (batches, placement, the model as the
searches run it)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import jax
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arc_jax import parallel
from arc_jax.data import ExperimentData, TextSplit, Tree, batch_order
from arc_jax.data.paths import DataFileError, cache_dir, find_data_file, source_of
from arc_jax.data.synonyms import SYNONYM_FILES
from arc_jax.perturbation import PlanBuilder, Space, Transformation, data_space
from arc_jax.perturbation.trees import TreeBatchBuilder, TreeSpace
from arc_jax.train.config import ConfigError
from arc_jax.train.families import FAMILIES, ModelFamily, Placed

SPLITS = {"train": "num_train", "validation": "num_dev", "test": "num_test"}
"""Split name → the config field that limits it to its first examples."""


@dataclasses.dataclass(frozen=True)
class Experiment:
  """A config, built.

  Attributes:
    config: the config.
    family: the model family of ``config.model`` (:mod:`arc_jax.train.families`).
    data: the prepared data (vocabulary, embeddings, full splits).
    splits: split name → the split (sentences, or a list of trees) limited by ``num_train`` /
      ``num_dev`` / ``num_test``.
    space: ``config.space`` restricted to the vocabulary (a tree space for Tree-LSTMs).
    builder: lowers examples for the DP with shapes fixed for the whole data (DP plans of
      sentences with the largest synonym list's slot count and at most
      ``config.max_dp_shapes`` (width, grid) shapes; trees padded to one node count), so each
      shape compiles once.
    graphdef, params, rest: ``nnx.split(model, nnx.Param, ...)`` of the freshly initialised
      model, ``params`` and ``rest`` (the frozen embeddings) replicated on ``mesh``.
    mesh: the data-parallel mesh.
  """

  config: ml_collections.ConfigDict
  family: ModelFamily
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
    return data_fingerprint(self.data)

  def examples(self, split: str) -> tuple[list, np.ndarray]:
    """The examples of ``split`` and their labels (n,)."""
    return self.family.lowering.examples(self.splits[split])

  def batches(self, split: str, batch_size: int, *, certify: bool, shuffle: bool = False,
              seed: int = 0, epoch: int = 0, start: int = 0) -> Iterator[Any]:
    """The batches of one epoch of ``split`` from batch number ``start`` on.

    The order is a pure function of (seed, epoch) (:func:`arc_jax.data.batch_order` over the
    family's example sizes, pooled by size when shuffled, sorted by size otherwise);
    ``certify``: the batches carry what the DP needs, and examples are sorted by the family's
    ``group`` before their size (rows of one batch share a reachable grid).
    """
    examples, labels = self.examples(split)
    keys = [self.family.lowering.size(x) for x in examples]
    if certify and self.family.lowering.group is not None:
      keys = [(*self.family.lowering.group(self.builder, x), size) for x, size in zip(examples, keys)]
    order = batch_order(keys, batch_size, seed=seed, epoch=epoch, shuffle=shuffle)
    if not 0 <= start <= len(order):
      raise ValueError(f"start={start} is outside the {len(order)} batches of this epoch.")
    for indices in order[start:]:
      yield self.family.lowering.lower(self.builder, examples, labels, indices, batch_size, certify)

  def put(self, batch):
    """A host batch as global arrays on the mesh, split along its rows."""
    return self.family.lowering.put(batch, self.mesh)

  def doubled(self, batch, partners: Callable[[list, np.ndarray], Sequence]):
    """A training batch of B rows as 2B rows, lowered as for a clean step (``certify=False``): its
    examples x, then ``partners(xs, labels)`` (one example per x, in order, with the label of its
    x)."""
    examples, labels = self.examples("train")
    indices = batch.indices[batch.indices >= 0]
    rows = [examples[i] for i in indices]
    members = rows + list(partners(rows, labels[indices]))
    return self.family.lowering.lower(self.builder, members, np.concatenate([labels[indices]] * 2),
                             range(len(members)), 2 * len(batch.indices), False)

  def model(self, params: nnx.State) -> nnx.Module:
    """The model with ``params`` (and the frozen embeddings)."""
    return nnx.merge(self.graphdef, params, self.rest)

  def placed(self, params: nnx.State) -> Placed:
    """The model with ``params`` as the host-side searches run it."""
    return Placed(self.graphdef, params, self.rest, self.mesh)


def data_fingerprint(data) -> dict:
  """The vocabulary size and a hash of the embedding table of prepared data."""
  return {"vocab_size": len(data.vocab) + 1,
          "embeddings_sha1": hashlib.sha1(np.ascontiguousarray(data.embeddings)).hexdigest()}


def use_compilation_cache() -> None:
  """Keeps XLA compilations on disk (``<arc_jax cache>/jax``) for the next process, every one of
  them: also those that compile in under a second and small ones (JAX's defaults leave them out).

  The ARC step compiles once per length bucket (tens of seconds each on CPU); with the cache a
  resumed run or an evaluation starts without recompiling. The small programs (a model's
  initialisers, the little steps around a DP) add up to a second or more per process too
  (``arc-certify``'s warm start, README).
  """
  jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "jax"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # -1: no size limit


def rewrite_share(transformation: Transformation, sentences: Sequence[Sequence[str]]) -> float:
  """Share of ``sentences`` with at least one window that ``transformation`` rewrites."""
  s = transformation.s
  rewritten = sum(any(transformation.replacements(tuple(x[i:i + s]))
                      for i in range(len(x) - s + 1)) for x in sentences)
  return rewritten / max(len(sentences), 1)


def _lexicon_file(config: ml_collections.ConfigDict, name: str) -> Path | None:
  """The data file a standard transformation takes its words from, if any."""
  relative = {"Sub": SYNONYM_FILES[config.synonyms], "Del": "stopwords.txt"}.get(name)
  return find_data_file(relative, config.data_dir) if relative else None


def check_data(config: ml_collections.ConfigDict, family: ModelFamily,
               data: ExperimentData) -> None:
  """Refuses data that would train without error and mean nothing (a garbled vector file, an
  empty lexicon), with one line naming the file, the share, the threshold and its override.

  Each default threshold passes the data of shared/data (measured with the shipped configs)
  with a margin and fails a vector file of two garbled lines or an empty synonym file:

  * ``config.min_vocab_coverage`` (0.1): the share of the vocabulary (every split's words and
    their Sub candidates) with a vector. SST-2 93.5% (18,482 of 19,758 words, PPDB with one
    candidate; 91.5% with every candidate), SST trees 91.5%, IMDB 34.4% (54,948 of 159,745,
    counter-fitted with every candidate: its reviews hold many rare forms); the garbled file
    covers 1 word of SST-2's 19,758 (0.005%).
  * ``config.max_empty_share`` (0.25): the share of a split's sentences (trees) none of whose
    words has a vector. 0 in every split of SST-2, the SST trees and IMDB; the garbled file
    empties 70% ("the" kept) to 98% of SST-2's training sentences, by the word it keeps; the
    tests' fake SST-2 has 1 of 5.
  * ``config.min_transformation_share`` (0.001): the share of the whole training split (not
    limited by ``num_train``) on which each transformation of ``config.space`` rewrites some
    window. SST-2 at least 0.35% (Trans3 of S_review; Trans4 0.44%, Trans1 3.7%, Trans2 5.5%,
    Del 65%, Sub 86%, Ins 100%), SST trees at least 89% (Del; Sub 97%), IMDB 100% (Sub); Sub
    of an empty synonym file: 0.
  """
  stats = data.stats
  covered, missing = stats["words_with_vectors"], stats["words_without_vectors"]
  coverage = covered / max(covered + missing, 1)
  if coverage < config.min_vocab_coverage:
    raise DataFileError(
        f"The vector file {stats['vectors']} has vectors for {covered:,} of the "
        f"{covered + missing:,} words of the vocabulary ({coverage:.3%}), under "
        f"config.min_vocab_coverage={config.min_vocab_coverage}. It should hold "
        f"{source_of('embeddings')}; fetch it again, or pass --config.min_vocab_coverage=0.0 to "
        "train anyway.")
  for split, counts in stats["splits"].items():
    if counts["empty_share"] > config.max_empty_share:
      raise DataFileError(
          f"{counts['empty_share']:.2%} of the {stats['dataset']} {split} examples "
          f"({len(counts['empty']):,}) have no word with a vector in {stats['vectors']}, over "
          f"config.max_empty_share={config.max_empty_share}. Pass --config.max_empty_share=1.0 "
          "to train anyway.")
  examples, _ = family.lowering.examples(data.splits["train"])
  sentences = [family.lowering.tokens(x) for x in examples]
  for transformation in data_space(data, config.space).transformations:
    share = rewrite_share(transformation, sentences)
    if share < config.min_transformation_share:
      lexicon = _lexicon_file(config, transformation.name)
      raise (DataFileError if lexicon else ConfigError)(
          f"{transformation.name} of config.space={config.space!r}"
          f"{f' (words from {lexicon})' if lexicon else ''} rewrites {share:.3%} of the "
          f"{len(sentences):,} {stats['dataset']} training examples, under "
          f"config.min_transformation_share={config.min_transformation_share}. Pass "
          "--config.min_transformation_share=0.0 to train anyway.")


def build_experiment(config: ml_collections.ConfigDict, mesh: Mesh | None = None,
                     data: ExperimentData | None = None) -> Experiment:
  """Prepares the data and initialises the model of ``config`` (seeded by ``config.seed``).

  Args:
    config: a training config (see :func:`arc_jax.train.default_config`); ``config.model``
      picks the model family.
    mesh: the data mesh; default all devices (:func:`parallel.data_mesh`).
    data: data without splits, as a kept model holds it
      (:func:`arc_jax.train.export.load_kept_data`): the experiment then has no splits (it
      classifies and certifies given examples, evaluates no split) and reads no data folder.
      Default: the data of ``config``, prepared from the data folder and checked
      (:func:`check_data`).
  """
  mesh = parallel.data_mesh() if mesh is None else mesh
  try:
    parallel.check_batch_size(config.batch_size, mesh)
    parallel.check_batch_size(config.eval_batch_size, mesh, "eval_batch_size")
  except ValueError as error:
    raise ConfigError(str(error)) from None
  family = FAMILIES[config.model]
  if data is None:
    data = family.lowering.prepare_data(config)
    check_data(config, family, data)
  splits = {name: data.splits[name][:config[field]] for name, field in SPLITS.items()
            if name in data.splits}
  for name, split in splits.items():
    if not len(split):
      raise ConfigError(f"The {name} split is empty; raise config.{SPLITS[name]}.")
  space = family.lowering.make_space(data, config.space)
  graphdef, params, rest = nnx.split(family.model.make_model(config, data), nnx.Param, ...)
  replicated = parallel.replicated(mesh)
  builder = family.lowering.make_builder(data, space, config.max_dp_shapes)
  return Experiment(config, family, data, splits, space, builder, graphdef,
                    parallel.put(params, replicated), parallel.put(rest, replicated), mesh)
