"""Clean and certified losses (arc_jax.train.losses)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arc_jax import interval as iv
from arc_jax.certify import Certificate
from arc_jax.train import max_of_means_loss, worst_case_loss
from arc_jax.train.losses import arc_loss, cross_entropy, node_cross_entropy
from tests.helpers.jit_variants import assert_same_result


def random_certificate(rng, labels):
  """A certificate whose margins are consistent with a random logit box."""
  lo = rng.normal(size=(len(labels), 2)).astype(np.float32)
  hi = lo + rng.uniform(0, 2, size=lo.shape).astype(np.float32)
  y = np.asarray(labels)
  other = 1 - y
  margin_other = lo[np.arange(len(y)), y] - hi[np.arange(len(y)), other] + 0.1  # tighter
  margins = np.zeros_like(lo)
  margins[np.arange(len(y)), other] = margin_other
  return Certificate(iv.Interval(jnp.asarray(lo), jnp.asarray(hi)), jnp.asarray((lo + hi) / 2),
                     jnp.asarray(margins), jnp.asarray(margin_other > 0))


def bce(d, y):
  """Binary cross-entropy of the single logit d (the original's loss)."""
  return np.log1p(np.exp(-d)) if y == 1 else np.log1p(np.exp(d))


def test_max_of_means_matches_its_binary_definition():
  rng = np.random.default_rng(0)
  labels = np.array([1, 0, 1, 1, 0])
  weights = np.array([1, 1, 1, 0, 1], np.float32)  # row 3 is padding
  cert = random_certificate(rng, labels)
  lo, hi, m = (np.asarray(a) for a in (cert.logits.lo, cert.logits.hi, cert.margins))
  d_lo = np.where(labels == 1, m[:, 0], lo[:, 1] - hi[:, 0])
  d_hi = np.where(labels == 1, hi[:, 1] - lo[:, 0], -m[:, 1])
  real = weights > 0
  expected = max(np.mean([bce(d, y) for d, y in zip(d_lo[real], labels[real])]),
                 np.mean([bce(d, y) for d, y in zip(d_hi[real], labels[real])]))
  got = max_of_means_loss(cert, jnp.asarray(labels), jnp.asarray(weights))
  np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_worst_case_bounds_max_of_means_and_equals_it_for_one_label():
  rng = np.random.default_rng(1)
  for labels in ([1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0]):
    labels = jnp.asarray(labels)
    cert = random_certificate(rng, np.asarray(labels))
    weights = jnp.ones(labels.shape)
    worst, mixed = worst_case_loss(cert, labels, weights), max_of_means_loss(cert, labels, weights)
    assert mixed <= worst + 1e-6
    if len(set(np.asarray(labels).tolist())) == 1:
      np.testing.assert_allclose(mixed, worst, rtol=1e-5)


def test_max_of_means_refuses_more_than_two_classes():
  cert = Certificate(iv.Interval(jnp.zeros((2, 3)), jnp.ones((2, 3))), jnp.zeros((2, 3)),
                     jnp.zeros((2, 3)), jnp.zeros((2,), bool))
  with pytest.raises(ValueError, match="worst_case"):
    max_of_means_loss(cert, jnp.zeros((2,), jnp.int32), jnp.ones((2,)))


def test_node_cross_entropy_averages_over_the_labelled_nodes_only():
  rng = np.random.default_rng(2)
  logits = rng.normal(size=(2, 3, 5)).astype(np.float32)
  labels = np.array([[4, -1, 0], [-1, -1, 2]])
  expected = np.mean([-jax.nn.log_softmax(logits[b, n])[labels[b, n]]
                      for b, n in zip(*np.nonzero(labels >= 0))])
  got = node_cross_entropy(jnp.asarray(logits), jnp.asarray(labels))
  np.testing.assert_allclose(got, expected, rtol=1e-5)


class LossesJittedOrNotTest(chex.TestCase):
  """The losses are pure: jitted and not (chex variants) they give the same scalar (float32, a
  few ulps), and in both the worst-case loss bounds the max-of-means loss and the cross-entropy
  of logits that meet the certified margins."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_losses_agree_jitted_or_not_and_keep_their_order(self):
    rng = np.random.default_rng(3)
    labels = jnp.asarray([1, 0, 1, 1, 0])
    weights = jnp.asarray([1, 1, 1, 0, 1], jnp.float32)
    cert = random_certificate(rng, np.asarray(labels))
    node_logits = jnp.asarray(rng.normal(size=(2, 3, 5)).astype(np.float32))
    node_labels = jnp.asarray([[4, -1, 0], [-1, -1, 2]])
    # Logits z with z_y − z_j ≥ margins_j for every j ≠ y: each row's CE is ≤ its worst case.
    slack = np.where(np.arange(2)[None] == np.asarray(labels)[:, None], 0.0,
                     rng.uniform(0, 1, size=(5, 2))).astype(np.float32)
    meeting = cert.worst_case_logits - jnp.asarray(slack)
    losses = {
        "cross_entropy": (cross_entropy, (cert.clean_logits, labels, weights)),
        "cross_entropy_meeting_margins": (cross_entropy, (meeting, labels, weights)),
        "node_cross_entropy": (node_cross_entropy, (node_logits, node_labels)),
        "worst_case": (worst_case_loss, (cert, labels, weights)),
        "max_of_means": (max_of_means_loss, (cert, labels, weights)),
        "arc": (arc_loss, (jnp.float32(0.7), jnp.float32(1.5), jnp.float32(0.25))),
    }
    out = {}
    for name, (loss, args) in losses.items():
      out[name] = self.variant(loss)(*args)
      assert_same_result(out[name], loss(*args), exact=False)
      chex.assert_shape(out[name], ())
      chex.assert_type(out[name], jnp.float32)
    assert out["max_of_means"] <= out["worst_case"]
    assert out["cross_entropy_meeting_margins"] <= out["worst_case"]
