"""Certification entry points: the pure ``certify_fn`` and the convenience :func:`certify`."""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Mapping, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import interval as iv
from arc_jax.certify.attention_dp import attention_features
from arc_jax.certify.lstm_dp import certified_features
from arc_jax.nn import cells
from arc_jax.nn.models import LSTMClassifier
from arc_jax.perturbation.plans import Plan, PlanBuilder
from arc_jax.perturbation.spaces import Signature, Space


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Certificate:
  """What certification proves about a batch.

  Attributes:
    logits: Interval (B, K) containing the logits of every string of S(x).
    clean_logits: (B, K) logits of x itself.
    margins: (B, K) lower bounds of z_y − z_j over S(x) (0 at j = y); computed through the last
      layer directly, which is tighter than subtracting the logit bounds.
    certified: (B,) bool, every margin with j ≠ y is positive: no string of S(x) changes the
      prediction away from the label y.
  """

  logits: iv.Interval
  clean_logits: jax.Array
  margins: jax.Array
  certified: jax.Array

  @property
  def worst_case_logits(self) -> jax.Array:
    """Logits −margins (B, K): cross-entropy on them bounds the loss of every member of S(x)."""
    return -self.margins


def _margin_lower_bounds(out: cells.Dense, hidden: iv.Interval, labels: jax.Array) -> jax.Array:
  """Lower bounds of z_y − z_j = (W_y − W_j)·a + (b_y − b_j) over the box ``hidden`` (B, D).

  Soundness: the same centre/radius argument as :func:`interval.linear`, per example, with the
  difference of two rows of the last layer as the kernel.
  """
  kernel, bias = out.kernel[...], out.bias[...]
  diff = kernel[:, labels].T[:, :, None] - kernel[None]  # (B, D, K)
  centre = jnp.einsum("bd,bdk->bk", hidden.centre, diff) + (bias[labels][:, None] - bias[None])
  spread = jnp.einsum("bd,bdk->bk", hidden.radius, jnp.abs(diff))
  return (centre - spread).at[jnp.arange(labels.shape[0]), labels].set(0.0)


def certify_model(model: LSTMClassifier, space: Space | Signature, plan: Plan, labels: jax.Array,
                  eps: jax.Array | float = 1.0, dropout_key: jax.Array | None = None
                  ) -> Certificate:
  """Certifies a batch (see :class:`Certificate`); differentiable in the model parameters.

  Args:
    model: the classifier.
    space: the perturbation space the plan was built for (or its signature).
    plan: the batch (B, N) lowered by :class:`~arc_jax.perturbation.PlanBuilder`.
    labels: int (B,).
    eps: hull scale in [0, 1] (1 = the full space; smaller values are the training curriculum).
    dropout_key: applies the head's dropout (training); None for certification.
  """
  chex.assert_rank(plan.token_ids, 2)
  chex.assert_shape(labels, (plan.token_ids.shape[0],))
  eps = jnp.asarray(eps, model.embeddings[...].dtype)
  features = attention_features if model.pooling == "attention" else certified_features
  box, clean = features(model, space.signature, plan, eps)
  hidden = model.head_activations(box, dropout_key)
  hidden_clean = model.head_activations(clean, dropout_key)
  logits = model.head_out(hidden)
  margins = _margin_lower_bounds(model.head_out, hidden, labels)
  others = jnp.arange(margins.shape[1])[None, :] != labels[:, None]
  certified = jnp.all(jnp.where(others, margins > 0, True), axis=1)
  return Certificate(logits, model.head_out(hidden_clean), margins, certified)


def _certify_state(graphdef, signature, state, plan, labels, eps=1.0, dropout_key=None):
  states = state if isinstance(state, tuple) else (state,)
  return certify_model(nnx.merge(graphdef, *states), signature, plan, labels, eps, dropout_key)


certify_jit = jax.jit(_certify_state, static_argnums=(0, 1))
"""``certify_jit(graphdef, signature, state, plan, labels, eps=1.0, dropout_key=None)``: the
jitted certify_fn, cached across calls by (graphdef, space signature, array shapes)."""


def make_certify_fn(graphdef: nnx.GraphDef, space: Space | Signature) -> Callable[..., Certificate]:
  """A pure ``certify_fn(state, plan, labels, eps=1.0, dropout_key=None) -> Certificate``.

  ``graphdef, state = nnx.split(model)`` once (or ``graphdef, params, rest =
  nnx.split(model, nnx.Param, ...)`` and pass ``state=(params, rest)`` to differentiate with
  respect to the parameters only). The returned function depends only on its arguments, so it can
  be wrapped in ``jax.jit``, ``jax.vmap`` and ``jax.grad``.
  """
  return functools.partial(_certify_state, graphdef, space.signature)


def certify(model: LSTMClassifier, space: Space, sentences: Sequence[Sequence[str]],
            labels: Sequence[int], vocab: Mapping[str, int], *, batch_size: int = 32,
            eps: float = 1.0) -> dict[str, np.ndarray]:
  """Certifies raw token lists: the convenience entry point for users holding a model.

  Sentences are sorted by length into buckets and certified in jitted batches.

  Returns:
    dict of numpy arrays in the input order: ``certified`` (n,), ``margins`` (n, K),
    ``logits_lo``, ``logits_hi`` and ``clean_logits`` (n, K).
  """
  space = space.restricted_to(vocab)
  builder = PlanBuilder(space, vocab)
  graphdef, state = nnx.split(model)
  order = np.argsort([len(s) for s in sentences], kind="stable")
  labels = np.asarray(labels, np.int32)
  parts = []
  for start in range(0, len(order), batch_size):
    idx = order[start:start + batch_size]
    plan = builder.build([sentences[i] for i in idx], batch_size=batch_size)
    y = np.zeros((batch_size,), np.int32)
    y[:len(idx)] = labels[idx]
    cert = certify_jit(graphdef, space.signature, state, plan, y, eps)
    parts.append(jax.tree.map(lambda a: np.asarray(a)[:len(idx)], cert))
  merged = jax.tree.map(lambda *a: np.concatenate(a), *parts)
  inverse = np.argsort(order)
  return {
      "certified": merged.certified[inverse], "margins": merged.margins[inverse],
      "logits_lo": merged.logits.lo[inverse], "logits_hi": merged.logits.hi[inverse],
      "clean_logits": merged.clean_logits[inverse],
  }
