"""Jitted training and evaluation steps (pure functions of a :class:`TrainState` and a batch).

A step is one ``jax.jit`` around forward, backward and the Optax update (on one CPU device, an
ARC step is the gradients of row parts of its batch in concurrent calls, then the update:
:class:`PartsTrainStep`). Its objective is either the clean cross-entropy (concrete forward
pass, no DP) or ARC's ``(1 − λ)·clean + λ·robust`` from one certification call (with a dropout
key, the DP's slot 0 is the clean run under the same dropout masks as the box). Objectives and
evaluation functions report per-row outcomes (:class:`RowMetrics`), so the steps serve every
model family: this module holds the generic steps, :mod:`arc_jax.train.objectives` the
objectives. Metric totals are summed on the device inside the step, so the host fetches them
only when it logs.

The factories are memoised: equal arguments return the same function object, so ``jax.jit``
reuses its compilations when a process builds the same step twice (resuming, evaluating after
training, tests).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Iterable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh

from arc_jax import parallel

TOTALS = ("loss", "correct", "examples", "certified", "certify_examples")
"""Keys of the metric totals a train step accumulates: Σ loss·examples, Σ correct, Σ examples,
and, for certified steps, Σ certified and the examples certified."""


class RowMetrics(NamedTuple):
  """Per-row outcomes of one batch (a row is an example: a sentence, or a tree at its root).

  Attributes:
    weights: float (B,), 1 for real rows, 0 for padding rows.
    correct: bool (B,), the clean prediction equals the label.
    certified: bool (B,), certified by the DP; None where the step does not certify.
    prediction: int (B,), the clean prediction; None where a step does not report it.
    margin: float (B,), the least of logit_y − logit_j over j ≠ y: the certificate's lower
      bound over S(x) where the step certifies, else the clean logits'; None where a step does
      not report it.
  """

  weights: jax.Array
  correct: jax.Array
  certified: jax.Array | None = None
  prediction: jax.Array | None = None
  margin: jax.Array | None = None


def least_margin(margins: jax.Array, labels: jax.Array) -> jax.Array:
  """min over j ≠ y of ``margins[..., j]`` (B, K) → (B,); +inf with one class."""
  others = jnp.arange(margins.shape[-1]) != labels[..., None]
  return jnp.min(jnp.where(others, margins, jnp.inf), axis=-1)


def clean_margins(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """logit_y − logit_j (B, K) of concrete logits (B, K) and labels (B,)."""
  return jnp.take_along_axis(logits, labels[..., None], axis=-1) - logits


Objective = Callable[[nnx.Module, object, jax.Array | None, jax.Array],
                     tuple[jax.Array, RowMetrics]]
"""``objective(model, batch, dropout_key, step) -> (loss, RowMetrics)``."""


@dataclasses.dataclass(frozen=True)
class MeanObjective:
  """An :data:`Objective` whose loss is a weighted mean Σ_t w_t·ℓ_t / max(Σ_t w_t, 1) over the
  terms t of its batch (rows, or labelled nodes), each term depending on its own row only: a
  train step may then compute it on parts of a batch (:func:`make_train_step`).

  Attributes:
    loss: the objective itself.
    weights: ``(batch) -> w``, the weights of the batch's terms (any shape).
    take_rows: ``(batch, start, size) -> batch``, rows ``start:start + size`` of a batch
      (traced; ``start`` may be a traced integer, ``size`` is static).
  """

  loss: Objective
  weights: Callable[[object], jax.Array]
  take_rows: Callable[[object, jax.Array, int], object]

  def __call__(self, model, batch, dropout_key, step):
    return self.loss(model, batch, dropout_key, step)


RowsFn = Callable[[nnx.Module, object], RowMetrics]
"""``rows(model, batch) -> RowMetrics`` without dropout: what an evaluation step computes."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainState:
  """Everything a step updates, and everything a checkpoint needs to resume.

  Attributes:
    step: int32 (), steps taken (the schedules' argument).
    params: the model's ``nnx.Param`` state (the frozen embeddings are not in it).
    opt_state: the Optax state of ``params``.
    dropout_key: uint32 key data; step s uses ``fold_in(key, s)``.
  """

  step: jax.Array
  params: nnx.State
  opt_state: optax.OptState
  dropout_key: jax.Array


OPTIMIZERS = {
    "adam": optax.adam,
    "adagrad": functools.partial(optax.adagrad, initial_accumulator_value=0.0, eps=1e-10),
}
"""``config.optimizer`` → the Optax optimiser of a learning rate: Adam (the LSTMs) or Adagrad
(the Tree-LSTM) with torch's defaults (accumulators start at 0; ε 1e-10, added inside the square
root by Optax and outside by torch, which differs only for near-zero accumulators)."""


def _is_embedding(params):
  """Marks the ``embeddings`` entry of a model's parameter state (True) and nothing else."""
  return jax.tree_util.tree_map_with_path(
      lambda path, _: getattr(path[0], "key", None) == "embeddings", params)


def _not_embedding(params):
  return jax.tree.map(lambda e: not e, _is_embedding(params))


@functools.cache
def make_optimizer(learning_rate: float, weight_decay: float, grad_clip: float,
                   optimizer: str = "adam", embedding_lr_scale: float | None = None
                   ) -> optax.GradientTransformation:
  """The original's torch optimiser: clip the global norm, add ``wd·param``, then Adam/Adagrad.

  torch clips the gradients first and ``Adam(weight_decay=wd)`` (or ``Adagrad``) adds
  ``wd·param`` to them inside its step (coupled L2, not AdamW). Updates with non-finite
  gradients are skipped, as the original skips NaN-gradient batches.

  Args:
    learning_rate, weight_decay, grad_clip: lr, wd and the global-norm clip.
    optimizer: a key of :data:`OPTIMIZERS`.
    embedding_lr_scale: for models whose word vectors are a parameter (the state's
      ``embeddings`` entry), their learning rate is ``embedding_lr_scale × learning_rate`` and
      they get no weight decay: the original Tree-LSTM's second torch parameter group. Scaling
      the final update is that learning rate exactly, for Adam and Adagrad alike, since both
      keep per-coordinate statistics and are linear in the learning rate. None: one group.
  """
  if optimizer not in OPTIMIZERS:
    raise ValueError(f"Unknown optimizer {optimizer!r}; choose one of {sorted(OPTIMIZERS)}.")
  decay = optax.add_decayed_weights(weight_decay)
  parts = [optax.clip_by_global_norm(grad_clip),
           decay if embedding_lr_scale is None else optax.masked(decay, _not_embedding),
           OPTIMIZERS[optimizer](learning_rate)]
  if embedding_lr_scale is not None:
    parts.append(optax.masked(optax.scale(embedding_lr_scale), _is_embedding))
  return optax.apply_if_finite(optax.chain(*parts), max_consecutive_errors=100)


def trained_embedding_scale(config) -> float | None:
  """The learning-rate factor of the word vectors when the model trains them, else None (they
  are frozen). A family whose model can train them declares ``trainable_embeddings`` and
  ``embedding_lr_scale`` in its block (the Tree-LSTM's ``config.tree_lstm``)."""
  block = config.get(config.model) or {}
  return block["embedding_lr_scale"] if block.get("trainable_embeddings") else None


def config_optimizer(config) -> optax.GradientTransformation:
  """:func:`make_optimizer` of an experiment config (training and checkpoint restoring)."""
  return make_optimizer(config.learning_rate, config.weight_decay, config.grad_clip,
                        config.optimizer,
                        trained_embedding_scale(config))


def init_state(params: nnx.State, tx: optax.GradientTransformation, seed: int) -> TrainState:
  return TrainState(jnp.zeros((), jnp.int32), params, tx.init(params),
                    jax.random.key_data(jax.random.key(seed)))


def zero_totals() -> dict[str, jax.Array]:
  return {k: jnp.zeros((), jnp.float32) for k in TOTALS}


def _accumulate(totals, loss, rows: RowMetrics):
  w = rows.weights
  n = jnp.sum(w)
  out = dict(totals, loss=totals["loss"] + loss * n,
             correct=totals["correct"] + jnp.sum(rows.correct * w),
             examples=totals["examples"] + n)
  if rows.certified is not None:
    out.update(certified=totals["certified"] + jnp.sum(rows.certified * w),
               certify_examples=totals["certify_examples"] + n)
  return out


def _step_key(state: TrainState) -> jax.Array:
  return jax.random.fold_in(jax.random.wrap_key_data(state.dropout_key), state.step)


def _update(tx: optax.GradientTransformation, state: TrainState, grads) -> TrainState:
  updates, opt_state = tx.update(grads, state.opt_state, state.params)
  return TrainState(state.step + 1, optax.apply_updates(state.params, updates), opt_state,
                    state.dropout_key)


@functools.cache
def make_train_step(graphdef: nnx.GraphDef, tx: optax.GradientTransformation,
                    objective: Objective, mesh: Mesh, parts: int | None = None):
  """The training step ``step(state, rest, batch, totals) -> (state, totals)``.

  Args:
    graphdef: of ``nnx.split(model, nnx.Param, ...)``.
    tx: the optimiser.
    objective: e.g. ``clean_objective(family)`` or ``arc_objective(family, ...)`` (see
      :mod:`arc_jax.train.objectives`).
    mesh: the data mesh; ``state``, ``rest`` (the non-parameter model state) and ``totals`` are
      replicated on it, ``batch`` sharded along its rows (see :mod:`parallel`).
    parts: for a :class:`MeanObjective`, the row parts of a batch whose gradients are computed
      in concurrent calls before one update call (:class:`PartsTrainStep`); default
      :func:`parallel.concurrent_calls` of ``mesh`` (2 on one CPU device). Other objectives,
      and 1, make one jitted call per step.

  ``state`` and ``totals`` are donated: use the returned ones.
  """
  if isinstance(objective, MeanObjective):
    parts = parallel.concurrent_calls(mesh) if parts is None else parts
    if parts > 1:
      return PartsTrainStep(graphdef, tx, objective, mesh, parts)

  def step(state: TrainState, rest: nnx.State, batch, totals):
    def loss_fn(params):
      return objective(nnx.merge(graphdef, params, rest), batch, _step_key(state), state.step)

    (loss, rows), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    return _update(tx, state, grads), _accumulate(totals, loss, rows)

  return jax.jit(step, donate_argnums=(0, 3), out_shardings=parallel.replicated(mesh))


class PartsTrainStep:
  """A train step whose gradient is summed over row parts of the batch, computed in concurrent
  calls (:func:`parallel.ordered_map`), then applied by one jitted update call.

  With the batch's loss L = Σ_t w_t·ℓ_t / max(W, 1) (:class:`MeanObjective`), each part p
  computes S_p = L_p·max(W_p, 1) = Σ_{t∈p} w_t·ℓ_t, its weight W_p and ∇S_p; the update takes
  ∇L = Σ_p ∇S_p / max(Σ_p W_p, 1), the whole batch's gradient up to rounding. Part p draws its
  dropout masks from ``fold_in(step key, p)``, so a step's masks depend on the number of parts.

  Why: XLA on CPU runs most of the interval DP's elementwise fusions on one core, so two halves
  at once fill the idle cores of a multi-core CPU; on narrow grids, where a step is short, the
  split costs more than it gains (``benchmarks/train_throughput.py``; measurements in
  benchmarks/README.md).
  """

  def __init__(self, graphdef: nnx.GraphDef, tx: optax.GradientTransformation,
               objective: MeanObjective, mesh: Mesh, parts: int):
    self.parts = parts

    def part(state: TrainState, rest: nnx.State, batch, index: jax.Array, start: jax.Array,
             size: int):
      rows = objective.take_rows(batch, start, size)
      key = jax.random.fold_in(_step_key(state), index)

      def weighted_sum(params):
        loss, metrics = objective(nnx.merge(graphdef, params, rest), rows, key, state.step)
        weight = jnp.sum(objective.weights(rows))
        return loss * jnp.maximum(weight, 1.0), (weight, metrics)

      (total, (weight, metrics)), grads = jax.value_and_grad(weighted_sum, has_aux=True)(
          state.params)
      return total, weight, grads, metrics

    def update(state: TrainState, outputs, totals):
      total, weight, grads, metrics = zip(*outputs)
      scale = 1.0 / jnp.maximum(sum(weight), 1.0)
      grads = jax.tree.map(lambda *g: sum(g) * scale, *grads)
      rows = jax.tree.map(lambda *a: jnp.concatenate(a), *metrics)
      return _update(tx, state, grads), _accumulate(totals, sum(total) * scale, rows)

    self._part = jax.jit(part, static_argnums=5)
    self._update = jax.jit(update, donate_argnums=(0, 2), out_shardings=parallel.replicated(mesh))

  def __call__(self, state: TrainState, rest: nnx.State, batch, totals):
    rows = jax.tree.leaves(batch)[0].shape[0]
    size = -(-rows // self.parts)
    # Equal parts but the last: one compilation per batch shape when the parts divide it.
    spans = [(np.int32(i), np.int32(i * size), min(size, rows - i * size))
             for i in range(-(-rows // size))]
    outputs = list(parallel.ordered_map(lambda span: self._part(state, rest, batch, *span),
                                        spans, self.parts))
    return self._update(state, outputs, totals)


@functools.cache
def make_eval_step(graphdef: nnx.GraphDef, rows_fn: RowsFn, mesh: Mesh):
  """The jitted ``eval(params, rest, batch) -> {"correct": (B,), "certified": (B,), ...}``, with
  ``"prediction"`` and ``"margin"`` where ``rows_fn`` reports them.

  Args:
    graphdef: of ``nnx.split(model, nnx.Param, ...)``.
    rows_fn: e.g. ``classify_rows(family)`` (no ``"certified"`` key then) or
      ``certify_rows(family, signature)`` (:mod:`arc_jax.train.objectives`).
    mesh: the data mesh.

  Padding rows are False. The outputs are replicated (a (B,) all-gather), so every host can read
  them.
  """
  def evaluate(params: nnx.State, rest: nnx.State, batch):
    rows = rows_fn(nnx.merge(graphdef, params, rest), batch)
    real = rows.weights > 0
    out = {"correct": real & rows.correct}
    if rows.certified is not None:
      out["certified"] = real & rows.certified
    out.update({name: value for name, value in (("prediction", rows.prediction),
                                                ("margin", rows.margin)) if value is not None})
    return out

  return jax.jit(evaluate, out_shardings=parallel.replicated(mesh))


def evaluate_split(eval_step, params: nnx.State, rest: nnx.State, batches: Iterable,
                   num_examples: int, place: Callable, *, bar=None,
                   stop: Callable[[], None] | None = None, workers: int = 1
                   ) -> dict[str, np.ndarray]:
  """Per-example outcomes (n,) of a split, in split order: the eval step's keys (bool, or the
  dtype of the step's ``prediction`` and ``margin``).

  Args:
    eval_step: from :func:`make_eval_step`.
    params, rest: the model state.
    batches: the split's batches (``Experiment.batches``); their ``indices`` (host arrays) place each
      row.
    num_examples: n.
    place: host batch → its sharded arrays (``Experiment.put``).
    bar: a tqdm bar advanced once per batch (closed at the end), or None.
    stop: called before each batch; raises to abandon the evaluation (e.g.
      :meth:`arc_jax.train.interrupt.StopRequest.raise_if_set`).
    workers: batches evaluated at once (:func:`arc_jax.parallel.concurrent_calls`).

  With one worker and no (displayed) bar the host waits once, at the end; with a bar it keeps
  one batch in flight and counts the batches done.
  """
  shown = bar is not None and not bar.disable
  rows = []

  def placed():
    for batch in batches:
      if stop is not None:
        stop()
      rows.append(batch.indices)
      yield place(batch)

  outputs = []
  for out in parallel.ordered_map(lambda b: eval_step(params, rest, b), placed(), workers):
    outputs.append(out)
    if shown and len(outputs) > 1:
      jax.block_until_ready(outputs[-2])
      bar.update()
  outputs = jax.device_get(outputs)
  if bar is not None:
    bar.update(len(outputs) - bar.n)
    bar.close()
  flags = {}
  for out, idx in zip(outputs, rows):
    real = idx >= 0
    for name, values in out.items():
      flags.setdefault(name, np.zeros(num_examples, values.dtype))[idx[real]] = values[real]
  return flags
