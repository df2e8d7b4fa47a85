"""The interval (box) domain: ``Interval(lo, hi)`` and one sound transfer function per operation.

Every function here is pure and works elementwise on arrays of any shape. Each docstring states
why the result encloses every concrete value: for all concrete inputs ``x ∈ [lo, hi]`` (and
``y ∈ [y.lo, y.hi]``) the concrete output lies in the returned interval. The arguments are exact in
real arithmetic; floating-point rounding is not accounted for (as in the original ARC and most IBP
tools), which is why the tests compare with a small tolerance.

A *point* interval (``lo == hi``) goes through every function to the exact concrete result: the
centre of a point is the point itself and its radius is zero, so the affine map computes
``x @ w + b`` with the same operation as the concrete path.

Most functions accept a plain array wherever an ``Interval`` is accepted, so one model code path
serves concrete and abstract inputs (see :mod:`arc_jax.nn.cells`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Interval:
  """A box ``{x : lo <= x <= hi}`` with ``lo`` and ``hi`` of the same shape and dtype."""

  lo: jax.Array
  hi: jax.Array

  @property
  def shape(self):
    return self.lo.shape

  @property
  def dtype(self):
    return self.lo.dtype

  @property
  def centre(self) -> jax.Array:
    return (self.lo + self.hi) / 2

  @property
  def radius(self) -> jax.Array:
    return (self.hi - self.lo) / 2

  def __getitem__(self, index) -> Interval:
    return Interval(self.lo[index], self.hi[index])

  def reshape(self, *shape) -> Interval:
    return Interval(self.lo.reshape(*shape), self.hi.reshape(*shape))


Value = jax.Array | Interval


def point(x: jax.Array) -> Interval:
  """The degenerate interval [x, x]."""
  return Interval(x, x)


def is_interval(x) -> bool:
  return isinstance(x, Interval)


def linear(x: Value, kernel: jax.Array, bias: jax.Array | None = None) -> Value:
  """``x @ kernel + bias``.

  Soundness: write x = c + e with |e| ≤ r (c, r the centre and radius). Then
  x @ W = c @ W + e @ W and |e @ W| ≤ |e| @ |W| ≤ r @ |W| coordinatewise, so the image lies in
  [c@W − r@|W|, c@W + r@|W|]. This is also the smallest box containing the image of a box.
  """
  if not is_interval(x):
    y = x @ kernel
    return y if bias is None else y + bias
  centre = x.centre @ kernel
  if bias is not None:
    centre = centre + bias
  spread = x.radius @ jnp.abs(kernel)
  return Interval(centre - spread, centre + spread)


def monotone(fn: Callable[[jax.Array], jax.Array], x: Value) -> Value:
  """``fn(x)`` for a nondecreasing elementwise ``fn`` (ReLU, sigmoid, tanh, exp).

  Soundness: lo ≤ x ≤ hi implies fn(lo) ≤ fn(x) ≤ fn(hi).
  """
  if not is_interval(x):
    return fn(x)
  return Interval(fn(x.lo), fn(x.hi))


def add(x: Value, y: Value) -> Value:
  """``x + y``. Soundness: sums of lower (upper) bounds bound the sum from below (above)."""
  if not is_interval(x) and not is_interval(y):
    return x + y
  x, y = as_interval(x), as_interval(y)
  return Interval(x.lo + y.lo, x.hi + y.hi)


def mul(x: Value, y: Value) -> Value:
  """Elementwise ``x * y``.

  Soundness: for fixed y, x ↦ x·y is linear, so its extremes over [x.lo, x.hi] are at the
  endpoints; likewise in y. Hence the extremes over the box are among the four corner products.
  """
  if not is_interval(x) and not is_interval(y):
    return x * y
  x, y = as_interval(x), as_interval(y)
  corners = (x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi)
  lo = jnp.minimum(jnp.minimum(corners[0], corners[1]), jnp.minimum(corners[2], corners[3]))
  hi = jnp.maximum(jnp.maximum(corners[0], corners[1]), jnp.maximum(corners[2], corners[3]))
  return Interval(lo, hi)


def scale(x: Value, factor: jax.Array) -> Value:
  """``x * factor`` for a nonnegative ``factor`` (e.g. a dropout mask or 1/length).

  Soundness: multiplying by a nonnegative number is nondecreasing.
  """
  if not is_interval(x):
    return x * factor
  return Interval(x.lo * factor, x.hi * factor)


def join(x: Interval, y: Interval) -> Interval:
  """The smallest box containing both: every member of either is in ``[min lo, max hi]``."""
  return Interval(jnp.minimum(x.lo, y.lo), jnp.maximum(x.hi, y.hi))


def where(condition: jax.Array, x: Interval, y: Interval) -> Interval:
  """Selects ``x`` where ``condition`` holds, else ``y`` (broadcasting ``condition``)."""
  return Interval(jnp.where(condition, x.lo, y.lo), jnp.where(condition, x.hi, y.hi))


def masked_join(x: Interval, x_valid: jax.Array, y: Interval, y_valid: jax.Array
                ) -> tuple[Interval, jax.Array]:
  """Join of two possibly empty (⊥) boxes given validity masks; returns (box, valid).

  Soundness and tightness: ⊥ is the neutral element of the join, so an invalid operand
  contributes nothing; the values held in invalid slots never reach a valid result.
  ``x_valid`` / ``y_valid`` broadcast against the trailing feature axis from the left.
  """
  xv, yv = x_valid[..., None], y_valid[..., None]
  both = join(x, y)
  out = where(xv & yv, both, where(yv, y, x))
  return out, x_valid | y_valid


def hull(values: jax.Array, mask: jax.Array, axis: int, empty: jax.Array) -> Interval:
  """The smallest box containing the ``values`` whose ``mask`` is set, along ``axis``.

  Args:
    values: (..., R, ..., D) candidate vectors.
    mask: bool of shape ``values.shape[:-1]``: which candidates are real.
    axis: the candidate axis (must not be the last one).
    empty: the point used where no candidate is set (keeps ⊥ finite; callers mask it out).

  Soundness: every masked-in candidate lies between the coordinatewise min and max.
  """
  m = mask[..., None]
  lo = jnp.min(jnp.where(m, values, jnp.inf), axis=axis)
  hi = jnp.max(jnp.where(m, values, -jnp.inf), axis=axis)
  any_set = jnp.any(mask, axis=axis)[..., None]
  return Interval(jnp.where(any_set, lo, empty), jnp.where(any_set, hi, empty))


def shrink_towards(box: Interval, anchor: jax.Array, eps: jax.Array | float) -> Interval:
  """The box ``anchor + eps · (box − anchor)``: ε = 0 gives the point ``anchor``, ε = 1 ``box``.

  Used for the training curriculum; only ε = 1 is a sound abstraction of the full hull (for
  ε < 1 the result is a sub-box of ``hull(box ∪ {anchor})``).
  """
  return Interval(anchor + eps * (box.lo - anchor), anchor + eps * (box.hi - anchor))


def as_interval(x: Value) -> Interval:
  return x if is_interval(x) else point(x)



def softmax_weighted_sum(scores: Value, values: Value, mask: jax.Array) -> Value:
  """Attention pooling ``Σ_p softmax(scores)_p · values_p`` over the positions where ``mask`` is set.

  Args:
    scores: (..., P) attention scores, array or Interval.
    values: (..., P, D) the vectors pooled, array or Interval.
    mask: bool (..., P): which positions exist; a row without any gives 0 (an empty string).

  Returns:
    (..., D); an Interval when either input is one.

  Soundness: the result is a convex combination Σ_p α_p v_p with α = softmax(e), α_p ≥ 0, so
  for each feature it is at most Σ_p α_p u_p (u the upper ends of ``values``). Writing
  α_p = w_p / Σ_q w_q with w_p = exp(e_p − s) in the box [exp(lo_p − s), exp(hi_p − s)], the
  largest value of the ratio R(w) = Σ w_p u_p / Σ w_p over the box is exact: at its maximiser
  λ* = R(w*), Σ_p w_p (u_p − λ*) ≤ 0 for every w in the box with equality at w*, so w* maximises
  the linear function Σ_p w_p (u_p − λ*): upper weights where u_p > λ*, lower weights elsewhere.
  Sorting u decreasingly, w* is "upper weights on the first k positions, lower on the rest" for
  some k, and the largest R over the P + 1 such weightings is λ* (each weighting is in the box,
  so none exceeds it). Given boxes of scores and values this is the smallest sound bound, tighter
  than bounding each softmax weight by its own interval. The lower bound is the same rule on
  −values. Every value is also at most max_p u_p (a convex combination); that bound is used when
  exp would overflow.
  """
  if not is_interval(scores) and not is_interval(values):
    filled = jnp.where(mask, scores, -jnp.inf)
    top = jnp.max(filled, axis=-1, keepdims=True)
    weights = jnp.where(mask, jnp.exp(scores - jnp.where(jnp.isfinite(top), top, 0.0)), 0.0)
    total = jnp.sum(weights, axis=-1, keepdims=True)
    alpha = weights / jnp.where(total > 0, total, 1.0)
    return jnp.einsum("...p,...pd->...d", alpha, values)
  scores, values = as_interval(scores), as_interval(values)
  hi = _largest_weighted_mean(scores, values.hi, mask)
  lo = -_largest_weighted_mean(scores, -values.lo, mask)
  return Interval(lo, hi)


def _largest_weighted_mean(scores: Interval, values: jax.Array, mask: jax.Array) -> jax.Array:
  """max over e in ``scores`` of Σ_p softmax(e)_p · values_p per feature, by the threshold rule of
  :func:`softmax_weighted_sum`: (..., P) scores, (..., P, D) values, (..., P) mask → (..., D)."""
  dtype = values.dtype
  present = mask.any(axis=-1)[..., None]
  u = jnp.swapaxes(jnp.where(mask[..., None], values, 0.0), -1, -2)  # (..., D, P)
  el = jnp.where(mask, scores.lo, 0.0)
  eu = jnp.where(mask, scores.hi, 0.0)
  # Weights exp(e − s) with s the largest lower end: in every weighting some weight is ≥ 1, so no
  # denominator vanishes; an upper end too far above s would overflow (then the fallback below).
  shift = jnp.max(jnp.where(mask, el, -jnp.inf), axis=-1, keepdims=True)
  shift = jnp.where(jnp.isfinite(shift), shift, 0.0)
  cap = float(np.log(np.finfo(dtype).max)) / 2
  overflow = jnp.any(mask & (eu - shift > cap), axis=-1)[..., None]
  w_lo = jnp.where(mask, jnp.exp(el - shift), 0.0)[..., None, :]
  w_hi = jnp.where(mask, jnp.exp(jnp.minimum(eu - shift, cap)), 0.0)[..., None, :]
  largest = jnp.max(jnp.where(mask[..., None, :], u, -jnp.inf), axis=-1)
  order = jnp.argsort(-u, axis=-1)
  sort = lambda a: jnp.take_along_axis(jnp.broadcast_to(a, u.shape), order, axis=-1)
  u, w_lo, w_hi = sort(u), sort(w_lo), sort(w_hi)

  def split_sums(upper, lower):
    """Σ of ``upper`` over the first k sorted positions plus ``lower`` over the rest, k = 0..P."""
    first = jnp.cumsum(upper, axis=-1)
    rest = jnp.flip(jnp.cumsum(jnp.flip(lower, -1), axis=-1), -1)
    zero = jnp.zeros(first.shape[:-1] + (1,), dtype)
    return jnp.concatenate([zero, first], -1) + jnp.concatenate([rest, zero], -1)

  denominators = split_sums(w_hi, w_lo)
  ratios = split_sums(w_hi * u, w_lo * u) / jnp.where(denominators > 0, denominators, 1.0)
  best = jnp.where(overflow, largest, jnp.minimum(jnp.max(ratios, axis=-1), largest))
  return jnp.where(present, best, 0.0)
