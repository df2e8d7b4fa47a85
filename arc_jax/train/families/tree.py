"""Tree-LSTM classifiers of SST parse trees, labels on every node: the :data:`TREE` family.

* Batches: :class:`IndexedTrees`, trees lowered by one
  :class:`~arc_jax.perturbation.trees.TreeBatchBuilder` for the experiment's tree space, each
  batch padded to the first of :data:`NODE_COUNTS` or N that holds its trees (N the bucket of
  the largest tree of the data, plus 2 nodes per Dup budget), so the steps compile once per
  (node count, number of schedule steps), a few of each. Batches of similar trees (the pooled
  order) then carry about half the padding of one node count N = 128 on SST: the leaves, the
  node buffer and the output layer cost in proportion to it.
* Losses (:mod:`arc_jax.train.objectives`): the targets are every labelled node, so clean =
  mean cross-entropy over every labelled node; ARC robust = cross-entropy on every labelled
  node's worst-case logits (the DP bounds each node's logits over every tree its subtree
  becomes); ``(1 − λ)·clean + λ·robust``.
* Metrics per example are the root's: correct = root prediction equals the root label,
  certified = root certified (:class:`~arc_jax.certify.Certificate` with a node axis).
* EX enumerates S(t) exactly (:meth:`~arc_jax.perturbation.trees.TreeSpace.enumerate`); HF and
  HotFlip adversarial training search S(t) with :mod:`arc_jax.attacks.tree_hotflip`; data
  augmentation draws uniformly over application choices
  (:func:`~arc_jax.attacks.sample_tree_member`); both carry node labels over.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arc_jax import parallel
from arc_jax.attacks import (ExhaustiveResult, HotFlipResult, Journal,
                             exhaustive_tree_robustness, sample_tree_member,
                             tree_adversarial_examples, tree_hotflip_robustness)
from arc_jax.certify import Certificate, certify_model
from arc_jax.data import ExperimentData, Tree, prepare_tree_data
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.padding import NODE_BUCKETS, bucket
from arc_jax.perturbation import data_space
from arc_jax.perturbation.trees import (SUB, TreeBatch, TreeBatchBuilder, TreeSignature,
                                        TreeSpace, tree_space)
from arc_jax.settings import Setting, Settings
from arc_jax.train.families.base import (Lowering, ModelFamily, ModelFunctions, Placed, Searches,
                                         largest_synonym_list)
from arc_jax.train.steps import RowMetrics, clean_margins, least_margin

SST_CLASSES = 5
NODE_COUNTS = (32, 64)
"""The node counts below the data's largest that batches are padded to (SST trees: 32, 64, 128
nodes; with the pooled order 42%, 49% and 10% of the batches of an epoch)."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class IndexedTrees:
  """A batch of trees and where its rows come from.

  Attributes:
    trees: B trees padded to N nodes (padding rows have ``num_nodes`` 0 and labels -1).
    indices: int32 (B,), position of each row in its split, -1 for padding rows.
  """

  trees: TreeBatch
  indices: np.ndarray


def rows(batch: IndexedTrees, node_logits: jax.Array, certified: jax.Array | None = None,
         margins: jax.Array | None = None) -> RowMetrics:
  """Per-tree metrics from the root's logits (B, N, K) → (B, K) (and margins (B, N, K))."""
  trees = batch.trees
  b = jnp.arange(node_logits.shape[0])
  root = jnp.maximum(jnp.asarray(trees.num_nodes) - 1, 0)
  labels = jnp.asarray(trees.labels)[b, root]
  prediction = jnp.argmax(node_logits[b, root], axis=-1)
  margins = clean_margins(node_logits[b, root], labels) if margins is None else margins[b, root]
  return RowMetrics((jnp.asarray(trees.num_nodes) > 0).astype(jnp.float32), prediction == labels,
                    certified, prediction, least_margin(margins, labels))


def forward(model: TreeLSTMClassifier, batch: IndexedTrees, dropout_key) -> jax.Array:
  """Logits (B, N, K) of every node."""
  return model(batch.trees, dropout_key)


def certify(model: TreeLSTMClassifier, signature: TreeSignature, batch: IndexedTrees, eps,
            dropout_key, domain, **options) -> Certificate:
  """The tree DP (:func:`~arc_jax.certify.tree_dp.certify_tree_model`) on every labelled node;
  its clean logits are the unperturbed trees' under the same dropout masks. ``options``:
  ``join`` (:data:`~arc_jax.certify.tree_dp.JOINS`)."""
  trees = batch.trees
  return certify_model(model, signature, trees, trees.labels, eps, dropout_key, domain,
                       **options)


def targets(batch: IndexedTrees) -> tuple[jax.Array, jax.Array]:
  """Every labelled node (label -1: unlabelled or padding, weight 0)."""
  labels = jnp.asarray(batch.trees.labels)
  return jnp.maximum(labels, 0), (labels >= 0).astype(jnp.float32)


@functools.partial(jax.jit, static_argnums=0)
def _root_logits(graphdef: nnx.GraphDef, state: nnx.State, trees: TreeBatch) -> jax.Array:
  """Evaluation-mode logits (B, K) of every tree's root."""
  logits = nnx.merge(graphdef, state)(trees)
  return logits[jnp.arange(logits.shape[0]), jnp.maximum(trees.num_nodes - 1, 0)]


def prepare_data(config: ml_collections.ConfigDict) -> ExperimentData:
  return prepare_tree_data(synonyms=config.synonyms, max_candidates=config.max_candidates or None,
                           data_root=config.data_dir)


def make_space(data: ExperimentData, spec: str) -> TreeSpace:
  return tree_space(data_space(data, spec))


def make_builder(data: ExperimentData, space: TreeSpace, max_dp_shapes: int) -> TreeBatchBuilder:
  """Trees padded to node buckets, every batch on the whole grid: the buckets alone fix the
  shapes, so ``max_dp_shapes`` has nothing to bound. Data without splits (a kept model's) gets
  the smallest buckets."""
  del max_dp_shapes
  largest = max((t.num_nodes for trees in data.splits.values() for t in trees), default=1)
  nodes = bucket(largest + space.signature.added_nodes, NODE_BUCKETS)
  slots = largest_synonym_list(data) if space.signature.axis(SUB) is not None else 1
  counts = tuple(n for n in NODE_COUNTS if n < nodes) + (nodes,)
  return TreeBatchBuilder(data.vocab, space, min_substitutes=slots, node_buckets=counts)


SETTINGS = Settings("tree_lstm", {
    "trainable_embeddings": Setting(False, "train the word vectors too, at embedding_lr_scale × "
                                    "learning_rate and without weight decay (else frozen)"),
    "embedding_lr_scale": Setting(0.1, "learning-rate factor of trained word vectors",
                                  valid=(">= 0", lambda v: v >= 0)),
})
"""The Tree-LSTM family's settings (``config.tree_lstm``)."""


def make_model(config: ml_collections.ConfigDict, data: ExperimentData) -> TreeLSTMClassifier:
  return TreeLSTMClassifier(data.embeddings, hidden=config.hidden, num_classes=SST_CLASSES,
                            dropout_rate=config.dropout_rate,
                            trainable_embeddings=config.tree_lstm.trainable_embeddings,
                            rngs=nnx.Rngs(config.seed))


def examples(trees: Sequence[Tree]) -> tuple[list, np.ndarray]:
  return list(trees), np.array([t.label for t in trees], np.int32)


def lower(builder: TreeBatchBuilder, trees: Sequence[Tree], labels, indices: Sequence[int],
          batch_size: int, certify: bool) -> IndexedTrees:
  """Every batch is lowered for the space (``certify`` or not), so clean and certified steps
  share one batch structure; the trees carry their own (node) labels."""
  del labels, certify
  return IndexedTrees(builder.build([trees[i] for i in indices], batch_size),
                      np.asarray(list(indices) + [-1] * (batch_size - len(indices)), np.int32))


def put(batch: IndexedTrees, mesh: Mesh) -> IndexedTrees:
  return IndexedTrees(parallel.put_trees(batch.trees, mesh),
                      parallel.put(batch.indices, parallel.batch_sharded(mesh)))


def sample(space: TreeSpace, trees: list[Tree], rng: np.random.Generator) -> list[Tree]:
  return [sample_tree_member(space, tree, rng) for tree in trees]


def _root_predictor(placed: Placed) -> Callable[[TreeBatch], jax.Array | np.ndarray]:
  """``(batch) -> root logits (B, K)`` of the placed model, rows split over its mesh (gathered
  as :func:`arc_jax.parallel.gathered` does)."""
  graphdef, state = nnx.split(nnx.merge(placed.graphdef, placed.params, placed.rest))

  def predict_root_logits(trees: TreeBatch) -> jax.Array | np.ndarray:
    logits = _root_logits(graphdef, state, parallel.put_trees(trees, placed.mesh))
    return parallel.gathered(logits)

  return predict_root_logits


def attack(placed: Placed, space: TreeSpace, builder: TreeBatchBuilder, trees: list,
           labels: np.ndarray, batch_size: int) -> list:
  del labels  # each tree's root label
  return tree_adversarial_examples(placed.graphdef, (placed.params, placed.rest), space, trees,
                                   builder, batch_size=batch_size, mesh=placed.mesh)


def enumerate_space(placed: Placed, space: TreeSpace, builder: TreeBatchBuilder, trees: list,
                    labels: np.ndarray, certified: np.ndarray, *, shortcut: bool,
                    batch_size: int, progress: bool,
                    journal: Journal | None = None) -> ExhaustiveResult:
  del labels  # each tree's root label
  return exhaustive_tree_robustness(_root_predictor(placed), space, trees, builder,
                                    certified=certified, shortcut=shortcut,
                                    batch_size=batch_size, progress=progress, journal=journal)


def hotflip(placed: Placed, space: TreeSpace, builder: TreeBatchBuilder, trees: list,
            labels: np.ndarray, *, beam: int, batch_size: int, progress: bool) -> HotFlipResult:
  del labels  # each tree's root label
  return tree_hotflip_robustness(placed.graphdef, (placed.params, placed.rest), space, trees,
                                 builder, _root_predictor(placed), beam=beam,
                                 batch_size=batch_size, progress=progress, mesh=placed.mesh)


def empty_examples(trees: list) -> dict[str, Any]:
  del trees
  return {"indices": [], "policy": "leaves without vectors keep zero vectors, so no tree is "
                                   "empty"}


TREE = ModelFamily(
    name="tree_lstm", datasets=("sst_trees",), robust_losses=("worst_case",),
    lowering=Lowering(prepare_data=prepare_data, make_space=make_space,
                      make_builder=make_builder, examples=examples,
                      size=lambda tree: tree.num_nodes, lower=lower, put=put,
                      empty_examples=empty_examples, tokens=lambda tree: tree.tokens,
                      check_space=tree_space),
    model=ModelFunctions(make_model=make_model, forward=forward, certify=certify,
                         targets=targets, rows=rows),
    searches=Searches(sample=sample, attack=attack, enumerate=enumerate_space, hotflip=hotflip),
    settings=SETTINGS)
"""Tree-LSTMs on SST trees (``config.model = "tree_lstm"``)."""
