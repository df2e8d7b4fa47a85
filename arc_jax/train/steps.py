"""Jitted training and evaluation steps (pure functions of a :class:`TrainState` and a batch).

A step is one ``jax.jit`` around forward, backward and the Optax update. Its objective is either
the clean cross-entropy (concrete forward pass, no DP) or ARC's ``(1 − λ)·clean + λ·robust``
from one certification call (with a dropout key, the DP's slot 0 is the clean run under the same
dropout masks as the box). Metric totals are summed on the device inside the step, so the host
fetches them only when it logs.

The factories are memoised: equal arguments return the same function object, so ``jax.jit``
reuses its compilations when a process builds the same step twice (resuming, evaluating after
training, tests).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Iterable

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh

from arc_jax.certify import certify_model
from arc_jax.data import Batch
from arc_jax.nn import LSTMClassifier
from arc_jax.perturbation.spaces import Signature
from arc_jax.train import losses, parallel

TOTALS = ("loss", "correct", "examples", "certified", "certify_examples")
"""Keys of the metric totals a train step accumulates: Σ loss·examples, Σ correct, Σ examples,
and, for certified steps, Σ certified and the examples certified."""

Objective = Callable[[LSTMClassifier, Batch, jax.Array, jax.Array],
                     tuple[jax.Array, tuple[jax.Array, jax.Array | None]]]
"""``objective(model, batch, dropout_key, step) -> (loss, (clean_logits (B, K), certified (B,)
or None))``."""


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


@functools.cache
def make_optimizer(learning_rate: float, weight_decay: float, grad_clip: float
                   ) -> optax.GradientTransformation:
  """The original's torch optimiser: clip the global norm, add ``wd·param``, then Adam.

  torch clips the gradients first and ``Adam(weight_decay=wd)`` adds ``wd·param`` to them inside
  its step (coupled L2, not AdamW). Updates with non-finite gradients are skipped, as the
  original skips NaN-gradient batches.
  """
  return optax.apply_if_finite(
      optax.chain(optax.clip_by_global_norm(grad_clip), optax.add_decayed_weights(weight_decay),
                  optax.adam(learning_rate)),
      max_consecutive_errors=100)


def init_state(params: nnx.State, tx: optax.GradientTransformation, seed: int) -> TrainState:
  return TrainState(jnp.zeros((), jnp.int32), params, tx.init(params),
                    jax.random.key_data(jax.random.key(seed)))


def zero_totals() -> dict[str, jax.Array]:
  return {k: jnp.zeros((), jnp.float32) for k in TOTALS}


def clean_objective(model, batch, dropout_key, step):
  """Cross-entropy of the concrete forward pass (normal training, and ARC while λ = 0)."""
  del step
  logits = model(batch.token_ids, batch.lengths, dropout_key)
  return losses.cross_entropy(logits, batch.labels, batch.weights), (logits, None)


@functools.cache
def arc_objective(signature: Signature, robust_weight: optax.Schedule, eps: optax.Schedule,
                  robust_loss: str) -> Objective:
  """ARC's ``(1 − λ(step))·clean + λ(step)·robust`` with hulls scaled by ε(step).

  Args:
    signature: the space's signature (static).
    robust_weight, eps: schedules of λ and ε.
    robust_loss: a key of :data:`losses.ROBUST_LOSSES`.
  """
  robust_fn = losses.ROBUST_LOSSES[robust_loss]

  def objective(model, batch, dropout_key, step):
    cert = certify_model(model, signature, batch.plan, batch.labels, eps(step), dropout_key)
    clean = losses.cross_entropy(cert.clean_logits, batch.labels, batch.weights)
    robust = robust_fn(cert, batch.labels, batch.weights)
    return losses.arc_loss(clean, robust, robust_weight(step)), (cert.clean_logits,
                                                                cert.certified)

  return objective


def _accumulate(totals, loss, logits, certified, batch):
  w = batch.weights
  n = jnp.sum(w)
  correct = jnp.argmax(logits, axis=-1) == batch.labels
  out = dict(totals, loss=totals["loss"] + loss * n,
             correct=totals["correct"] + jnp.sum(correct * w), examples=totals["examples"] + n)
  if certified is not None:
    out.update(certified=totals["certified"] + jnp.sum(certified * w),
               certify_examples=totals["certify_examples"] + n)
  return out


@functools.cache
def make_train_step(graphdef: nnx.GraphDef, tx: optax.GradientTransformation,
                    objective: Objective, mesh: Mesh):
  """The jitted ``step(state, rest, batch, totals) -> (state, totals)``.

  Args:
    graphdef: of ``nnx.split(model, nnx.Param, ...)``.
    tx: the optimiser.
    objective: :func:`clean_objective` or :func:`arc_objective`.
    mesh: the data mesh; ``state``, ``rest`` (the non-parameter model state) and ``totals`` are
      replicated on it, ``batch`` sharded along its rows (see :mod:`parallel`).

  ``state`` and ``totals`` are donated: use the returned ones.
  """
  def step(state: TrainState, rest: nnx.State, batch: Batch, totals):
    chex.assert_rank(batch.token_ids, 2)
    key = jax.random.fold_in(jax.random.wrap_key_data(state.dropout_key), state.step)

    def loss_fn(params):
      return objective(nnx.merge(graphdef, params, rest), batch, key, state.step)

    (loss, (logits, certified)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    new_state = TrainState(state.step + 1, optax.apply_updates(state.params, updates), opt_state,
                           state.dropout_key)
    return new_state, _accumulate(totals, loss, logits, certified, batch)

  return jax.jit(step, donate_argnums=(0, 3), out_shardings=parallel.replicated(mesh))


@functools.cache
def make_eval_step(graphdef: nnx.GraphDef, signature: Signature, mesh: Mesh):
  """The jitted ``eval(params, rest, batch) -> (correct (B,), certified (B,))`` at ε = 1.

  One certification pass without dropout gives both: its clean logits (DP slot 0) and its
  certificate. Padding rows are False in both. The outputs are replicated (a (B,) all-gather),
  so every host can read them.
  """
  def evaluate(params: nnx.State, rest: nnx.State, batch: Batch):
    cert = certify_model(nnx.merge(graphdef, params, rest), signature, batch.plan, batch.labels)
    real = batch.weights > 0
    correct = real & (jnp.argmax(cert.clean_logits, axis=-1) == batch.labels)
    return correct, real & cert.certified

  return jax.jit(evaluate, out_shardings=parallel.replicated(mesh))


def classify_and_certify(eval_step, params: nnx.State, rest: nnx.State, batches: Iterable[Batch],
                         num_examples: int, mesh: Mesh) -> tuple[np.ndarray, np.ndarray]:
  """Per-example (correct, certified) bool (n,) of a split, in split order.

  ``batches`` are the split's batches with plans (e.g. ``iterate_batches(..., shuffle=False,
  plan_builder=...)``); their ``indices`` place each row. The host waits once, at the end.
  """
  outputs, rows = [], []
  for batch in batches:
    outputs.append(eval_step(params, rest, parallel.put(batch, parallel.batch_sharded(mesh))))
    rows.append(batch.indices)
  correct, certified = np.zeros(num_examples, bool), np.zeros(num_examples, bool)
  for (c, k), idx in zip(jax.device_get(outputs), rows):
    real = idx >= 0
    correct[idx[real]], certified[idx[real]] = c[real], k[real]
  return correct, certified
