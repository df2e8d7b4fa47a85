"""Losses of clean and certified training, weighted so that padding rows (weight 0) do not count.

ARC's objective (paper Eq. 3 and the appendix "Details of Training"; docs/ALGORITHM.md §7) is
``(1 − λ)·clean + λ·robust``; ``robust`` is either the cross-entropy on per-example worst-case
logits (the default: an upper bound on the loss of every string of S(x)) or the original's "max
of two batch means" (binary only, for comparison).
Tree-LSTMs use the same two terms per labelled node (their targets are nodes).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import optax

from arc_jax.certify import Certificate


def weighted_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
  """Σ w·v / Σ w over the batch: (B,), (B,) → (); 0 for an all-padding batch."""
  chex.assert_equal_shape([values, weights])
  return jnp.sum(values * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def cross_entropy(logits: jax.Array, labels: jax.Array, weights: jax.Array) -> jax.Array:
  """Weighted mean softmax cross-entropy of logits (..., K) and int labels (...): every position
  of the leading axes (a row (B,), or a node of a batch of trees (B, N)) is one term."""
  chex.assert_rank(logits, {2, 3})
  chex.assert_shape([labels, weights], logits.shape[:-1])
  values = optax.softmax_cross_entropy_with_integer_labels(
      logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
  return weighted_mean(values, weights.reshape(-1))


def node_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Mean cross-entropy over the labelled nodes of a batch of trees.

  Args:
    logits: (B, N, K) per node.
    labels: int (B, N), -1 at unlabelled nodes and padding (they do not count).
  """
  chex.assert_rank(logits, 3)
  return cross_entropy(logits, jnp.maximum(labels, 0), (labels >= 0).astype(logits.dtype))


def worst_case_loss(cert: Certificate, labels: jax.Array, weights: jax.Array) -> jax.Array:
  """Weighted mean cross-entropy on the worst-case logits −margins (B, K), or (B, N, K) per node.

  For every string x' of S(x), CE(z(x'), y) ≤ CE(−margins, y), because CE depends on the logits
  only through the differences z_j − z_y, each bounded above by −margins_j.
  """
  return cross_entropy(cert.worst_case_logits, labels, weights)


def max_of_means_loss(cert: Certificate, labels: jax.Array, weights: jax.Array) -> jax.Array:
  """The original's binary certified loss ``max(mean_b BCE(d_lo,b, y_b), mean_b BCE(d_hi,b, y_b))``.

  The original model has one logit d; with K = 2 logits it is d = z_1 − z_0 and
  BCE(d, y) = CE([0, d], y). Its bounds [d_lo, d_hi] over S(x) are, per example:

  * at the end that is worst for the label, the certificate's margin (tight): for y = 1,
    d_lo = margins[:, 0]; for y = 0, d_hi = −margins[:, 1];
  * at the other end, from the logit box: for y = 1, d_hi = hi_1 − lo_0; for y = 0,
    d_lo = lo_1 − hi_0.

  Each batch mean uses the same end for every example, so for a batch that mixes labels one
  mean takes the best case of half of the batch: this is a lower bound of
  :func:`worst_case_loss`, equal to it for a single-label batch (docs/ORIGINAL.md §5, §8 item 3).

  Args:
    cert: the batch's certificate; logits (B, 2).
    labels: int (B,) in {0, 1}.
    weights: (B,).
  """
  if cert.margins.shape[-1] != 2:
    raise ValueError(f"max_of_means is defined for 2 classes, got {cert.margins.shape[-1]}; "
                     "use robust_loss='worst_case'.")
  box = cert.logits
  positive = labels == 1
  d_lo = jnp.where(positive, cert.margins[:, 0], box.lo[:, 1] - box.hi[:, 0])
  d_hi = jnp.where(positive, box.hi[:, 1] - box.lo[:, 0], -cert.margins[:, 1])
  bce = lambda d: cross_entropy(jnp.stack([jnp.zeros_like(d), d], axis=-1), labels, weights)
  return jnp.maximum(bce(d_lo), bce(d_hi))


ROBUST_LOSSES = {"worst_case": worst_case_loss, "max_of_means": max_of_means_loss}

WEIGHTED_MEAN_LOSSES = ("worst_case",)
"""The robust losses that are, like :func:`cross_entropy`, weighted means Σ w·ℓ / max(Σ w, 1)
of per-term losses with the batch's weights, so that a batch's loss follows from its parts'
(max_of_means takes a max over whole-batch means)."""


def arc_loss(clean: jax.Array, robust: jax.Array, robust_weight: jax.Array) -> jax.Array:
  """``(1 − λ)·clean + λ·robust`` with λ = ``robust_weight``."""
  return (1.0 - robust_weight) * clean + robust_weight * robust
