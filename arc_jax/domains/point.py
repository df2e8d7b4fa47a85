"""The point domain: concrete values as their own abstraction (registered as ``point``).

Sound for concrete values only; unsound for real sets. A point value is one array, not a set:
every rule computes the concrete operation, so run through the cells and the DPs on a space whose
S(x) = {x} it reproduces the plain forward pass (up to the rounding of a different XLA program:
its rules do not round outward, so even there its "bounds" are not enclosures in floating point).
A set of more than one value has no point abstraction: a join or hull of two different points,
and :meth:`PointDomain.top`, are NaN. In the DPs as written NaN reaches the margins, and a NaN
margin certifies nothing (it is not > 0), but nothing proves that it always does: treat the
domain as unsound on any space with a real choice. Use it to test the domain seam
(``tests/test_domains.py`` runs every DP through it on spaces that match nowhere), never for
certificates.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from arc_jax import interval as iv
from arc_jax.domain import lstm_update_by_rules


@dataclasses.dataclass(frozen=True)
class PointDomain:
  """Concrete values as their own abstraction, +∞ the empty set ⊥ (the neutral element of the
  join). A join of two different points has no point abstraction: it is NaN, so a DP that joined
  two different states in a one-member space would fail a comparison with the forward pass
  instead of passing by accident (module docstring: sound for concrete values only)."""

  exact_on_points = True
  refines = None

  def lift(self, x):
    return x

  def to_box(self, x):
    return iv.Interval(x, x)

  def representative(self, x):
    return x

  def top(self, like):
    return jnp.full(like.shape, jnp.nan, like.dtype)

  def linear(self, x, kernel, bias=None):
    y = jnp.matmul(x, kernel, precision=iv.PRECISION)
    return y if bias is None else y + bias

  def margin_lower_bounds(self, x, kernel, bias):
    z = self.linear(x, kernel, bias)
    return z[..., :, None] - z[..., None, :]

  def monotone(self, fn, x):
    return fn(x)

  def add(self, x, y):
    return x + y

  def mul(self, x, y):
    return x * y

  mul_nonneg = mul
  scale = mul

  def divide(self, x, divisor):
    return x / divisor

  def join(self, x, y):
    return jnp.where((x == y) | (y == jnp.inf), x, jnp.where(x == jnp.inf, y, jnp.nan))

  def where(self, condition, x, y):
    return jnp.where(condition, x, y)

  def masked_join(self, x, x_valid, y, y_valid):
    xv, yv = x_valid[..., None], y_valid[..., None]
    return jnp.where(xv & yv, self.join(x, y), jnp.where(yv, y, x)), x_valid | y_valid

  def hull(self, values, mask, axis, empty=None):
    m = mask[..., None]
    lo = jnp.min(jnp.where(m, values, jnp.inf), axis=axis)
    hi = jnp.max(jnp.where(m, values, -jnp.inf), axis=axis)
    one = jnp.where(lo == hi, lo, jnp.where(lo == jnp.inf, jnp.inf, jnp.nan))  # ⊥ if none
    return one if empty is None else jnp.where(jnp.any(mask, axis=axis)[..., None], one, empty)

  def shrink_towards(self, box, anchor, eps):
    return anchor + eps * (box - anchor)

  def softmax_weighted_sum(self, scores, values, mask):
    return iv.softmax_weighted_sum(scores, values, mask)  # on arrays: the concrete pooling

  def lstm_update(self, gates_in, recurrent, c):
    return lstm_update_by_rules(self, gates_in, recurrent, c)


POINT = PointDomain()
"""The point domain (``make_domain("point")``)."""
