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


def _outward(lo: jax.Array, hi: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Moves each computed end one float outwards, covering the rounding of its last operation.

  Applied only by the specialised rules below (the general rules follow the module's note on
  rounding until the whole domain rounds outward through one primitive).
  """
  if not OUTWARD_ROUNDING:
    return lo, hi
  return jnp.nextafter(lo, -jnp.inf), jnp.nextafter(hi, jnp.inf)


OUTWARD_ROUNDING = True
"""Whether :func:`_outward` widens results; read at trace time (benchmarks compare both)."""


def mul_nonneg(x: Value, y: Value) -> Value:
  """Elementwise ``x * y`` for an ``x`` known to be non-negative (a sigmoid gate of the LSTM).

  Soundness: for fixed y the product is nondecreasing in x ≥ 0 when y ≥ 0 and nonincreasing when
  y < 0; for fixed x ≥ 0 it is nondecreasing in y. So the minimum over the box is y.lo · x.lo if
  y.lo ≥ 0 and y.lo · x.hi otherwise, the maximum y.hi · x.hi if y.hi ≥ 0 and y.hi · x.lo
  otherwise: two products and two selects instead of four corners and six min/max, the same box.
  ``x.lo`` is clamped at 0 first, which is sound because every concrete x is non-negative (it
  keeps the rule sound if an outward-rounded sigmoid ends one float below 0). Each end is then
  rounded outward. Plain arrays give the concrete product.
  """
  if not is_interval(x) and not is_interval(y):
    return x * y
  x, y = as_interval(x), as_interval(y)
  x_lo = jnp.maximum(x.lo, 0)
  lo = y.lo * jnp.where(y.lo >= 0, x_lo, x.hi)
  hi = y.hi * jnp.where(y.hi >= 0, x.hi, x_lo)
  return Interval(*_outward(lo, hi))


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
