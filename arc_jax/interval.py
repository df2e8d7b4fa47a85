"""The interval (box) domain: ``Interval(lo, hi)`` and one sound transfer function per operation.

Every function here is pure and works elementwise on arrays of any shape. Each docstring states
why the result encloses every value the operation can take: for all inputs ``x ∈ [lo, hi]`` (and
``y ∈ [y.lo, y.hi]``) the returned box contains

* the exact (real-arithmetic) result of the operation, and
* every result a floating-point evaluation of the same formula can produce: rounding to nearest
  (with or without flush-to-zero of subnormals), any summation order of a dot product, fused or
  unfused multiply-adds, and elementwise functions within their measured error.

So certificates are proofs in floating point: the concrete forward pass of every member string,
run in the model's dtype, lies inside the certified box (tested strictly, without tolerance, in
float32 and float64). Ends are rounded outward with :func:`round_outward`; the argument for each
rule is in its docstring. The two facts used throughout: rounding to nearest is *monotone*
(a ≤ b ⇒ fl(a) ≤ fl(b)), so a concrete rounded result stays between the rounded images of
real bounds; and widening a rounded value by a few ulps steps past the real value it rounds.

A *point* interval (``lo == hi``) encloses the concrete result within a few ulps (elementwise
rules), within the dot-product error bound ``γ_n·|x|·|W|`` (affine maps), or within a few tens
of ulps of 1 (the fused LSTM update, :meth:`IntervalDomain.lstm_update`, whose widenings are
absolute: every gate lies in [−1, 1]).

The rules are the methods of :class:`IntervalDomain`, an implementation of the
:class:`~arc_jax.domain.Domain` protocol that the layers and the DPs are written against.
``IntervalDomain()`` (:data:`SOUND`, the default everywhere a certificate is reported) rounds
outward; ``IntervalDomain(round_outward=False)`` (:data:`UNROUNDED`, used by the training
objectives only) computes the same rules in real arithmetic, ends rounded to nearest: bounds of
the exact model, not proofs about its floating-point evaluation, and cheaper. The module-level
functions (``linear``, ``add``, ...) are the sound domain's rules.

Most rules accept a plain array wherever an ``Interval`` is accepted, so one model code path
serves concrete and abstract inputs (see :mod:`arc_jax.nn.cells`); on arrays they compute the
plain concrete result.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from arc_jax.domain import lstm_update_by_rules

PRECISION = jax.lax.Precision.HIGHEST
"""Matmul precision of affine maps, concrete and abstract: full float32 products on every
platform (accelerators may otherwise use reduced-precision products, outside the error model)."""


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


def _unit_roundoff(dtype) -> float:
  return float(np.finfo(dtype).eps) / 2


def _tiny(dtype):
  """The smallest normal number: the largest absolute error of flushing a subnormal to zero."""
  return np.finfo(dtype).tiny


def round_outward(lo: jax.Array, hi: jax.Array) -> Interval:
  """``[lo, hi]`` widened by 4u relative plus 4·tiny: ``[lo − (4u|lo| + 4t), hi + (4u|hi| + 4t)]``.

  The rounding primitive of every rule (u the unit roundoff, t the smallest normal number).
  Let ``lo`` be the rounding to nearest of a real ``a`` in one operation, with or without
  flush-to-zero (XLA on CPU flushes subnormals): |lo − a| ≤ u|lo| + t. Then the returned lower
  end is ≤ a. Proof: the computed widening d = fl(fl(4u|lo|) + 4t) is at least
  (4u(1 − u)|lo| + 3t)(1 − u), and the computed difference is at most
  lo − d + u(|lo| + d) + t, which is ≤ lo − u|lo| − t ≤ a because d(1 − u) ≥ 2u|lo| + 2t.
  Symmetrically for ``hi``. Four elementwise operations per end, fused into the operation's own
  loop: about two ulps wider than ``nextafter``, which costs many more operations and made
  certification markedly slower in our measurement (``benchmarks/rounding_cost.py``).
  """
  u = _unit_roundoff(lo.dtype)
  rel, tiny = np.asarray(4 * u, lo.dtype), np.asarray(4 * _tiny(lo.dtype), lo.dtype)
  return Interval(lo - (jnp.abs(lo) * rel + tiny), hi + (jnp.abs(hi) * rel + tiny))


def _up(x: jax.Array) -> jax.Array:
  """A float ≥ the real value that ``x`` rounds in one operation (see :func:`round_outward`)."""
  return round_outward(x, x).hi


def _const_up(value: float, dtype) -> np.ndarray:
  """A constant of ``dtype`` that is ≥ ``value`` (rounded up, not to nearest)."""
  return np.nextafter(np.asarray(value, dtype), np.asarray(np.inf, dtype))


def dot_error(n: int, dtype) -> float:
  """γ_n = n·u / (1 − n·u), u the unit roundoff: the relative error bound of a dot product.

  For any order of summation (and with or without fused multiply-adds), a float dot product of
  length n satisfies |fl(x·w) − x·w| ≤ γ_n |x|·|w| (Higham, *Accuracy and Stability of
  Numerical Algorithms*, §3.1); for nonnegative terms fl(x·w) ≥ (1 − γ_n) x·w.
  """
  u = _unit_roundoff(dtype)
  if n * u >= 0.1:
    raise ValueError(f"Dot products of length {n} are too long for sound bounds in {dtype}.")
  return n * u / (1 - n * u)


def _linear_constants(n: int, dtype) -> tuple[np.ndarray, ...]:
  """α, β, τ, ε and τ' of :meth:`IntervalDomain.linear` for fan-in ``n``, each rounded up.

  Computed in float64 with 4u of slack for its own rounding (which matters for float64 only).
  """
  u, t = _unit_roundoff(dtype), float(_tiny(dtype))
  gamma = dot_error(n + 1, dtype)
  grow = (1 + 2 * gamma) * (1 + 12 * u)
  alpha = (1 + gamma) * (1 + 2 * u) * grow + 4 * u
  beta = (2 * gamma + 3 * u * (1 + gamma)) * grow + 4 * u
  eps = (2 * gamma + 2 * u) * (1 + 8 * u) + 4 * u
  return tuple(_const_up(value, dtype) for value in (alpha, beta, 16 * t, eps, (6 * n + 16) * t))


def _nonneg_matmul_upper(v: jax.Array, m: jax.Array) -> jax.Array:
  """An upper bound of the exact ``v @ m`` for nonnegative ``v`` and ``m``.

  Soundness: the computed product P satisfies P ≥ (1 − γ_n)·v@m (:func:`dot_error`), so
  v@m ≤ P / (1 − γ_n) ≤ P·(1 + 2γ_n) for γ_n ≤ 1/2; the product with that constant (rounded
  up) is rounded up once more.
  """
  n = m.shape[0]
  factor = _const_up(1 + 2 * dot_error(n, m.dtype), m.dtype)
  return _up(jnp.matmul(v, m, precision=PRECISION) * factor)


def _matmul_pair(x: jax.Array, y: jax.Array, a: jax.Array, b: jax.Array
                 ) -> tuple[jax.Array, jax.Array]:
  """``(x @ a, y @ b)`` as one batched product: x, y (..., n) of one shape, a, b (n, k).

  Every output element is the same dot product as in its own matmul (whose error bound,
  :func:`dot_error`, holds for any summation order), so the rules' soundness arguments are
  those of two products. Why: an interval affine map needs two products of one shape (centre
  and spread), and on CPU one call of twice the work runs faster than two (benchmarks/README.md).
  """
  batch, n = x.shape[:-1], x.shape[-1]
  rows = lambda v: v.reshape(-1, n)
  both = jnp.matmul(jnp.stack([rows(x), rows(y)]), jnp.stack([a, b]), precision=PRECISION)
  return tuple(part.reshape(batch + (a.shape[1],)) for part in both)


def _centre_radius(x: Interval) -> tuple[jax.Array, jax.Array]:
  """A float centre c ∈ [lo, hi] and radius r with [c − r, c + r] ⊇ [lo, hi] in real arithmetic.

  c = fl((lo + hi)/2) lies in [lo, hi] by monotone rounding; r is max(hi − c, c − lo) rounded
  up, so it is at least the real distance from c to either end.
  """
  c = (x.lo + x.hi) / 2
  return c, _up(jnp.maximum(x.hi - c, c - x.lo))


def _magnitude(x: Interval) -> jax.Array:
  """max(|lo|, |hi|): an exact bound of |x| over the box."""
  return jnp.maximum(jnp.abs(x.lo), jnp.abs(x.hi))


_FUNCTION_ERRORS = {jax.nn.relu: (0, None), jax.nn.sigmoid: (32, (0.0, 1.0)),
                    jnp.tanh: (32, (-1.0, 1.0)), jnp.exp: (32, (0.0, None))}
"""Elementwise function → (relative widening in units of u, range of the function or None).

The widening is twice the implementation's error bound plus slack: XLA's float32 and float64
``tanh``, ``logistic`` and ``exp`` are measured within 8u (``tests/test_interval.py`` checks
it against long-double references on millions of inputs, saturation included). ReLU is exact.
"""


def as_interval(x: Value) -> Interval:
  return x if is_interval(x) else point(x)


@dataclasses.dataclass(frozen=True)
class IntervalDomain:
  """The interval domain: one transfer rule per operation (the :class:`~arc_jax.domain.Domain`
  protocol). Hashable, so it is a static argument of jitted functions.

  Attributes:
    round_outward: round every computed end outward and account for the floating-point error
      of each operation (the default): the box then contains every floating-point evaluation of
      the model, so certificates are proofs in floating point. False computes the same rules on
      the ends with rounding to nearest, bounding the real-arithmetic model up to rounding: for
      training objectives, whose bounds are a surrogate and never reported.
  """

  round_outward: bool = True

  def _round(self, lo: jax.Array, hi: jax.Array) -> Interval:
    """``[lo, hi]``, widened by :func:`round_outward` in the sound domain."""
    return round_outward(lo, hi) if self.round_outward else Interval(lo, hi)

  # -- the boundary: concrete values in, concrete bounds out ------------------------------------

  def lift(self, x: jax.Array) -> Interval:
    """The point box [x, x] of a concrete array (exact: x itself is the only value)."""
    return point(x)

  def to_box(self, x: Value) -> Interval:
    """The value as a box (it is one): what certificates report."""
    return as_interval(x)

  @property
  def exact_on_points(self) -> bool:
    """Points stay points exactly when ends are rounded to nearest (every rule then computes the
    concrete operation on them); outward rounding widens them."""
    return not self.round_outward

  @property
  def refines(self) -> None:
    """The interval domain refines no other."""
    return None

  def representative(self, x: Value) -> jax.Array:
    """A concrete array inside the box (its lower ends)."""
    return as_interval(x).lo

  def top(self, like: Value) -> Interval:
    """The box [−∞, ∞] of the shape and dtype of ``like``: no information."""
    inf = jnp.full(like.shape, jnp.inf, like.dtype)
    return Interval(-inf, inf)

  # -- affine maps ------------------------------------------------------------------------------

  def linear(self, x: Value, kernel: jax.Array, bias: jax.Array | None = None) -> Value:
    """``x @ kernel + bias`` (kernel (n, k)).

    Soundness in reals: write x = c + e with |e| ≤ r. Then x @ W = c @ W + e @ W and
    |e @ W| ≤ r @ |W|, so the image lies in [c@W − r@|W|, c@W + r@|W|] (+ b). Unrounded, this
    is the result (c and r computed to nearest; :func:`_unrounded_linear`).

    In floating point every end is one computed value: c = fl((lo + hi)/2), d = fl((hi − lo)/2),
    P = fl(c@W + b), and ``[P − S, P + S]`` with S = fl(fl(v@|W|) + e),
    v = fl(α·d + (β·|c| + τ)), e = fl(ε·|b| + τ') (the constants of :func:`_linear_constants`;
    u the unit roundoff, t the smallest normal, γ = γ_{n+1} of :func:`dot_error`, the bias
    counted as one more term). Every operation outside the two matmuls is elementwise on the
    (…, n) input or a parameter, so the sound rule costs the unrounded one's four ops on the
    (…, k) output, not more.

    Proof that fl(P − S) ≤ z for the real z = x@W + b and every float evaluation z̃ of it, for all
    x in the box (symmetrically for the upper end):

    1. Every x lies within ρ of c, ρ = (hi − lo)/2 + |c − (lo + hi)/2| ≤ (1 + 2u)(d + u|c|) + 4t
       (each operation has relative error u, and t more where its result is flushed to zero),
       and |x| ≤ |c| + ρ.
    2. Any summation order gives |z̃ − z| ≤ γ(|x|@|W| + |b|) + 2(n + 1)t (:func:`dot_error`,
       plus the flushes), and the same bounds P: |P − (c@W + b)| ≤ γ(|c|@|W| + |b|) + 2(n + 1)t.
       With z ≥ c@W + b − ρ@|W|, both z and z̃ are ≥ P − Σ,
       Σ = ((1 + γ)ρ + 2γ|c|)@|W| + 2γ|b| + 4(n + 1)t.
    3. Round to nearest gives fl(P − S) ≤ P − S(1 − u) + u|P| + t, and
       |P| ≤ (1 + γ)(|c|@|W| + |b|) + 2(n + 1)t. So S(1 − u) ≥ Σ + u|P| + t suffices, whose right
       side is at most (a₀d + b₀|c| + 5t)@|W| + e₀|b| + (4n + 6)t with a₀ = (1 + γ)(1 + 2u),
       b₀ = 2γ + 3u(1 + γ), e₀ = 2γ + 2u.
    4. The computed terms are nonnegative, so each rounded operation (fused or not) loses at most
       a factor (1 − u) and t: v ≥ (1 − u)³(α·d + β·|c|) + 11t, fl(v@|W|) ≥ (1 − γ)·v@|W| − 2nt,
       e ≥ (1 − 2u)ε|b| + (1 − u)τ' − 2t and S(1 − u) ≥ (1 − 2u)(fl(v@|W|) + e) − t. The
       constants α ≥ a₀g, β ≥ b₀g with g = (1 + 2γ)(1 + 12u) ≥ 1/((1 − γ)(1 − 5u)),
       ε ≥ e₀(1 + 8u) and τ' = (6n + 16)t make each term of step 3 covered.

    For a point box (d = 0) the width is ≈ 4γ(|x|@|W| + |b|) + 6u|x|@|W|: γ_{101} ≈ 6e-6 in
    float32.
    """
    if not is_interval(x):
      y = jnp.matmul(x, kernel, precision=PRECISION)
      return y if bias is None else y + bias
    if not self.round_outward:
      bias = jnp.zeros(kernel.shape[1], kernel.dtype) if bias is None else bias
      return Interval(*_unrounded_linear(x.lo, x.hi, kernel, bias))
    alpha, beta, tau, eps, tail = _linear_constants(kernel.shape[0], x.dtype)
    c, d = x.centre, x.radius
    centre, spread = _matmul_pair(c, d * alpha + (jnp.abs(c) * beta + tau), kernel,
                                  jnp.abs(kernel))
    if bias is None:
      spread = spread + tail
    else:
      centre = centre + bias
      spread = spread + (jnp.abs(bias) * eps + tail)
    return Interval(centre - spread, centre + spread)

  def margin_lower_bounds(self, x: Value, kernel: jax.Array, bias: jax.Array) -> jax.Array:
    """Lower bounds of z_y − z_j (..., K, K) for z = x @ kernel + bias over the box (..., n).

    Bounding the difference directly, through the kernel W_y − W_j, is tighter than subtracting
    the bounds of z_y and z_j. Unrounded, the result is the lower end of :meth:`linear` with that
    kernel.

    Soundness: in reals z_y − z_j = a·D + β with D = W_y − W_j, β = b_y − b_j. The computed
    D̃ = fl(D), β̃ = fl(β) are within u·S, u·s of them (S = |W_y| + |W_j|, s = |b_y| + |b_j|), so
    a·D + β ≥ a·D̃ + β̃ − u(|a|·S + s), and a·D̃ + β̃ is bounded below over the box by
    :meth:`linear`. The concrete logits are each within γ_{n+1}(|a|·|W_·| + |b_·|) of their real
    values (:meth:`linear`), so their difference, and its rounding, are at least
    a·D + β − γ_{n+1}(|a|·S + s). Hence z_y − z_j ≥ lo(linear(x, D̃, β̃)) − (γ_{n+1} + u)(m·S + s)
    with m = max(|lo|, |hi|), the error term rounded up and the difference rounded down.
    """
    x = as_interval(x)
    n, k = kernel.shape
    dtype = x.dtype
    diff = (kernel[:, :, None] - kernel[:, None, :]).reshape(n, k * k)
    base = self.linear(x, diff, (bias[:, None] - bias[None, :]).reshape(k * k)).lo
    if self.round_outward:
      mag, bmag = jnp.abs(kernel), jnp.abs(bias)
      total = _up((mag[:, :, None] + mag[:, None, :]).reshape(n, k * k))
      total_bias = _up((bmag[:, None] + bmag[None, :]).reshape(k * k))
      coef = _const_up(dot_error(n + 1, dtype) + _unit_roundoff(dtype), dtype)
      error = _up(_up(_nonneg_matmul_upper(_magnitude(x), total) + total_bias) * coef)
      base = round_outward(base - error, base).lo
    return base.reshape(base.shape[:-1] + (k, k))

  # -- elementwise rules --------------------------------------------------------------------------

  def monotone(self, fn: Callable[[jax.Array], jax.Array], x: Value) -> Value:
    """``fn(x)`` for a nondecreasing elementwise ``fn`` (ReLU, sigmoid, tanh, exp).

    Soundness: in reals lo ≤ x ≤ hi implies fn(lo) ≤ fn(x) ≤ fn(hi) (the unrounded result). In
    floating point the implementation f̃ is within E = 8u·|fn| of fn (not necessarily monotone),
    so f̃(x) ≤ fn(hi) + E ≤ f̃(hi) + 2E (+ tiny): the computed ends are widened by 32u relative,
    then rounded outward, and clipped to the function's range (which the implementation
    respects, tested). ReLU is exact and needs no widening.
    """
    if not is_interval(x):
      return fn(x)
    if fn not in _FUNCTION_ERRORS:
      raise ValueError(f"No floating-point error bound is known for {fn}; add it to "
                       "interval._FUNCTION_ERRORS with a measured bound.")
    ulps, bounds = _FUNCTION_ERRORS[fn]
    lo, hi = fn(x.lo), fn(x.hi)
    if not ulps or not self.round_outward:
      return Interval(lo, hi)
    rel = _const_up(ulps * _unit_roundoff(x.dtype), x.dtype)
    out = round_outward(lo - jnp.abs(lo) * rel, hi + jnp.abs(hi) * rel)
    low, high = bounds
    return Interval(out.lo if low is None else jnp.maximum(out.lo, low),
                    out.hi if high is None else jnp.minimum(out.hi, high))

  def add(self, x: Value, y: Value) -> Value:
    """``x + y``.

    Soundness: sums of lower (upper) bounds bound the sum from below (above); by monotone
    rounding the concrete fl(x + y) lies between the rounded sums of the ends, which
    :func:`round_outward` encloses.
    """
    if not is_interval(x) and not is_interval(y):
      return x + y
    x, y = as_interval(x), as_interval(y)
    return self._round(x.lo + y.lo, x.hi + y.hi)

  def mul(self, x: Value, y: Value) -> Value:
    """Elementwise ``x * y``.

    Soundness: for fixed y, x ↦ x·y is linear, so its extremes over [x.lo, x.hi] are at the
    endpoints; likewise in y. Hence the extremes over the box are among the four corner products.
    Rounding is monotone, so the concrete fl(x·y) lies between the smallest and largest rounded
    corners; the rounded ends are widened outward.
    """
    if not is_interval(x) and not is_interval(y):
      return x * y
    x, y = as_interval(x), as_interval(y)
    corners = (x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi)
    lo = jnp.minimum(jnp.minimum(corners[0], corners[1]), jnp.minimum(corners[2], corners[3]))
    hi = jnp.maximum(jnp.maximum(corners[0], corners[1]), jnp.maximum(corners[2], corners[3]))
    return self._round(lo, hi)

  def mul_nonneg(self, x: Value, y: Value) -> Value:
    """Elementwise ``x * y`` for an ``x`` known to be non-negative (a sigmoid gate of the LSTM).

    Soundness: for fixed y the product is nondecreasing in x ≥ 0 when y ≥ 0 and nonincreasing
    when y < 0; for fixed x ≥ 0 it is nondecreasing in y. So the minimum over the box is
    y.lo · x.lo if y.lo ≥ 0 and y.lo · x.hi otherwise, the maximum y.hi · x.hi if y.hi ≥ 0 and
    y.hi · x.lo otherwise: two products and two selects instead of four corners and six min/max,
    the same box. ``x.lo`` is clamped at 0 first, which is sound because every concrete x is
    non-negative (it keeps the rule sound if an outward-rounded sigmoid ends one float below 0).
    Floating point: as :meth:`mul`, each end is one rounded product of the corners, rounded
    outward. Plain arrays give the concrete product.
    """
    if not is_interval(x) and not is_interval(y):
      return x * y
    x, y = as_interval(x), as_interval(y)
    x_lo = jnp.maximum(x.lo, 0)
    lo = y.lo * jnp.where(y.lo >= 0, x_lo, x.hi)
    hi = y.hi * jnp.where(y.hi >= 0, x.hi, x_lo)
    return self._round(lo, hi)

  def scale(self, x: Value, factor: jax.Array) -> Value:
    """``x * factor`` for a nonnegative ``factor`` (e.g. a dropout mask).

    Soundness: multiplying by a nonnegative number is nondecreasing; rounding as in :meth:`add`.
    """
    if not is_interval(x):
      return x * factor
    return self._round(x.lo * factor, x.hi * factor)

  def divide(self, x: Value, divisor: jax.Array) -> Value:
    """``x / divisor`` for a positive ``divisor`` (e.g. a length, for mean pooling).

    Soundness: dividing by a positive number is increasing; rounding as in :meth:`add`. (Not
    ``scale(x, 1 / divisor)``: the reciprocal would add a rounding error of its own.)
    """
    if not is_interval(x):
      return x / divisor
    return self._round(x.lo / divisor, x.hi / divisor)

  # -- the LSTM cell, fused -------------------------------------------------------------------------

  def lstm_update(self, gates_in: Value, recurrent: Value, c: Value) -> tuple[Value, Value]:
    """The LSTM cell after its affine maps (:meth:`~arc_jax.domain.Domain.lstm_update`):
    i, f, o = σ(p), g = tanh(p) for p = gates_in + recurrent; c' = f·c + i·g; h' = o·tanh(c').

    Unrounded (and on plain arrays) this is :func:`~arc_jax.domain.lstm_update_by_rules` (on
    boxes with a hand-written backward pass, :func:`_unrounded_lstm_update`). The sound domain
    computes the same ends rounded to nearest and widens each quantity once by an
    *absolute* error bound, which exists because every gate lies in [−1, 1]: five widenings per
    step instead of one per operation and end, the same box up to a few ulps of 1.

    Soundness (u the unit roundoff, t the smallest normal; each operation has error
    ≤ u|y| + t, XLA's σ and tanh are within 8u|y| + t of the truth and inside their ranges):

    * Gates. p̂ = fl(G.lo + R.lo) is below every concrete p̃ = fl(g̃ + r̃) (monotone rounding),
      so σ̃(p̃) ≥ σ(p̃) − 8u − t ≥ σ̃(p̂) − 16u − 2t; for real p ≥ P = G.lo + R.lo,
      σ(p) ≥ σ(P) ≥ σ(p̂) − sup σ'·|p̂ − P| ≥ σ(p̂) − 0.37u − t, since σ'(ξ) ≤ min(1/4, e^{−|ξ|})
      and y·e^{−y} ≤ 1/e (for tanh, sech²(ξ) ≤ min(1, 4e^{−2|ξ|}) gives 0.74u). So σ̃(p̂) − K
      with K = 20u + 4t, its subtraction rounded (error ≤ u(1 + K) + t), is a lower end; then
      clipped to the function's range.
    * c' = f·c + i·g. With f, i ≥ 0 the minimum over the boxes is m = c.lo·f_s + g.lo·i_s (the
      selected ends, as :meth:`mul_nonneg`); our L = fl(fl(c.lo·f_s) + fl(g.lo·i_s)) and every
      float evaluation of f̃c̃ + ĩg̃ (any order, fused or not) are within 2.01u(M + 1) + 3t of
      m and of a value ≥ m respectively, M = max(|c.lo|, |c.hi|) ≥ |f·c|, |i·g| ≤ 1. So
      L − w with w = (M + 1)·6u + 12t (computed; ≥ 5.03u(M + 1) + 7t + u|L − w| after its own
      three roundings and the subtraction's) is a lower end.
    * tanh(c'): c' is a box of real and float values, so as for the gates without the input's
      rounding: tanh̃(c'.lo) − K.
    * h' = o·tanh(c'): ĥ = fl(T.lo·o_s) is fl of the exact minimum, so every concrete fl(õτ̃)
      ≥ ĥ (monotone rounding) and the real minimum is ≥ ĥ − u − t (|o·τ| ≤ 1); ĥ − (3u + 3t)
      covers both after its own rounding.
    The upper ends are symmetric.
    """
    if not any(map(is_interval, (gates_in, recurrent, c))):
      return lstm_update_by_rules(self, gates_in, recurrent, c)
    if not self.round_outward:
      gates, c = as_interval(self.add(gates_in, recurrent)), as_interval(c)
      h_lo, h_hi, c_lo, c_hi = _unrounded_lstm_update(gates.lo, gates.hi, c.lo, c.hi)
      return Interval(h_lo, h_hi), Interval(c_lo, c_hi)
    gates_in, recurrent, c = map(as_interval, (gates_in, recurrent, c))
    dtype = c.dtype
    u, t = _unit_roundoff(dtype), float(_tiny(dtype))
    k_gate, k_cell, t_cell, k_out = (_const_up(v, dtype) for v in (
        20 * u + 4 * t, 6 * u, 12 * t, 3 * u + 3 * t))

    def activation(fn, low, lo, hi):
      """[fn(lo) − K, fn(hi) + K] clipped to [low, 1], the range of fn."""
      return (jnp.maximum(fn(lo) - k_gate, low), jnp.minimum(fn(hi) + k_gate, 1))

    # σ on the whole [i | f | o] block, then split: one fusion per end instead of one per gate.
    p_lo, p_hi = gates_in.lo + recurrent.lo, gates_in.hi + recurrent.hi
    three = 3 * c.shape[-1]
    s_lo, s_hi = activation(jax.nn.sigmoid, 0, p_lo[..., :three], p_hi[..., :three])
    (i_lo, f_lo, o_lo), (i_hi, f_hi, o_hi) = jnp.split(s_lo, 3, -1), jnp.split(s_hi, 3, -1)
    g_lo, g_hi = activation(jnp.tanh, -1, p_lo[..., three:], p_hi[..., three:])
    c_lo = c.lo * jnp.where(c.lo >= 0, f_lo, f_hi) + g_lo * jnp.where(g_lo >= 0, i_lo, i_hi)
    c_hi = c.hi * jnp.where(c.hi >= 0, f_hi, f_lo) + g_hi * jnp.where(g_hi >= 0, i_hi, i_lo)
    w = (jnp.maximum(jnp.abs(c.lo), jnp.abs(c.hi)) + 1) * k_cell + t_cell
    c_new = Interval(c_lo - w, c_hi + w)
    t_lo, t_hi = activation(jnp.tanh, -1, c_new.lo, c_new.hi)
    h_lo = t_lo * jnp.where(t_lo >= 0, o_lo, o_hi) - k_out
    h_hi = t_hi * jnp.where(t_hi >= 0, o_hi, o_lo) + k_out
    return Interval(h_lo, h_hi), c_new

  # -- joins and selections (exact in floating point: min, max and select do not round) ---------

  def join(self, x: Value, y: Value) -> Interval:
    """The smallest box containing both: every member of either is in ``[min lo, max hi]``."""
    x, y = as_interval(x), as_interval(y)
    return Interval(jnp.minimum(x.lo, y.lo), jnp.maximum(x.hi, y.hi))

  def where(self, condition: jax.Array, x: Value, y: Value) -> Value:
    """Selects ``x`` where ``condition`` holds, else ``y`` (broadcasting ``condition``)."""
    if not is_interval(x) and not is_interval(y):
      return jnp.where(condition, x, y)
    x, y = as_interval(x), as_interval(y)
    return Interval(jnp.where(condition, x.lo, y.lo), jnp.where(condition, x.hi, y.hi))

  def masked_join(self, x: Value, x_valid: jax.Array, y: Value, y_valid: jax.Array
                  ) -> tuple[Interval, jax.Array]:
    """Join of two possibly empty (⊥) boxes given validity masks; returns (box, valid).

    Soundness and tightness: ⊥ is the neutral element of the join, so an invalid operand
    contributes nothing; the values held in invalid slots never reach a valid result.
    ``x_valid`` / ``y_valid`` broadcast against the trailing feature axis from the left.
    """
    xv, yv = x_valid[..., None], y_valid[..., None]
    both = self.join(x, y)
    out = self.where(xv & yv, both, self.where(yv, y, x))
    return out, x_valid | y_valid

  def hull(self, values: Value, mask: jax.Array, axis: int, empty: Value | None = None
           ) -> Interval:
    """The smallest box containing the ``values`` (points or boxes) whose ``mask`` is set.

    Args:
      values: (..., R, ..., D) candidate vectors, or boxes of them.
      mask: bool of shape ``values.shape[:-1]``: which candidates are real.
      axis: the candidate axis (must not be the last one).
      empty: the point or box used where no candidate is set (keeps ⊥ finite; callers mask it
        out); None leaves the empty box [+∞, −∞] there.

    Soundness: every masked-in candidate (box) lies between the coordinatewise min of the lower
    ends and max of the upper ends.
    """
    values = as_interval(values)
    m = mask[..., None]
    lo = jnp.min(jnp.where(m, values.lo, jnp.inf), axis=axis)
    hi = jnp.max(jnp.where(m, values.hi, -jnp.inf), axis=axis)
    if empty is None:
      return Interval(lo, hi)
    empty = as_interval(empty)
    any_set = jnp.any(mask, axis=axis)[..., None]
    return Interval(jnp.where(any_set, lo, empty.lo), jnp.where(any_set, hi, empty.hi))

  def shrink_towards(self, box: Value, anchor: Value, eps: jax.Array | float) -> Interval:
    """The box ``anchor + eps · (box − anchor)`` for eps ∈ [0, 1] (the training curriculum).

    ε = 0 gives (a box around) ``anchor``, ε = 1 ``box``; an ``anchor`` box shrinks each end
    towards its own end (ε = 0 gives the anchor box). Only ε = 1 is a sound abstraction of the
    full hull, and the sound domain returns ``box`` itself there, exactly (not a recomputation
    of its ends, which rounding may move inwards); other ε, whose boxes are a curriculum's
    surrogate and never certify anything, are computed to nearest in both domains.
    """
    box, anchor = as_interval(box), as_interval(anchor)
    lo = anchor.lo + eps * (box.lo - anchor.lo)
    hi = anchor.hi + eps * (box.hi - anchor.hi)
    if self.round_outward:
      whole = jnp.asarray(eps) == 1
      lo, hi = jnp.where(whole, box.lo, lo), jnp.where(whole, box.hi, hi)
    return Interval(lo, hi)

  # -- attention ----------------------------------------------------------------------------------

  def softmax_weighted_sum(self, scores: Value, values: Value, mask: jax.Array) -> Value:
    """Attention pooling ``Σ_p softmax(scores)_p · values_p`` over the positions where ``mask``
    is set.

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
    λ* = R(w*), Σ_p w_p (u_p − λ*) ≤ 0 for every w in the box with equality at w*, so w*
    maximises the linear function Σ_p w_p (u_p − λ*): upper weights where u_p > λ*, lower
    weights elsewhere. Sorting u decreasingly, w* is "upper weights on the first k positions,
    lower on the rest" for some k, and the largest R over the P + 1 such weightings is λ* (each
    weighting is in the box, so none exceeds it). Given boxes of scores and values this is the
    smallest sound bound, tighter than bounding each softmax weight by its own interval. The
    lower bound is the same rule on −values. Every value is also at most max_p u_p (a convex
    combination); that bound is used when exp would overflow. Floating point: both ends are
    widened by :func:`_weighted_mean_error` (not unrounded).
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
    if not self.round_outward:
      return Interval(lo, hi)
    error = _weighted_mean_error(scores, values, mask)
    return round_outward(lo - error, hi + error)


def _unrounded_lstm_forward(p_lo, p_hi, c_lo, c_hi):
  """:func:`~arc_jax.domain.lstm_update_by_rules` of the unrounded domain on the ends of the
  gate pre-activations p (..., 4H) and of c (..., H): the same operations in the same order.

  Returns ((h_lo, h_hi, c'_lo, c'_hi), residuals): σ of the ends of p's i, f, o part, tanh of
  the ends of its g part and of c', and c's ends.
  """
  hidden = c_lo.shape[-1]
  s_lo, s_hi = jax.nn.sigmoid(p_lo[..., :3 * hidden]), jax.nn.sigmoid(p_hi[..., :3 * hidden])
  g_lo, g_hi = jnp.tanh(p_lo[..., 3 * hidden:]), jnp.tanh(p_hi[..., 3 * hidden:])
  (i_lo, f_lo, o_lo), (i_hi, f_hi, o_hi) = jnp.split(s_lo, 3, -1), jnp.split(s_hi, 3, -1)
  i0, f0, o0 = (jnp.maximum(v, 0) for v in (i_lo, f_lo, o_lo))  # as IntervalDomain.mul_nonneg
  cn_lo = c_lo * jnp.where(c_lo >= 0, f0, f_hi) + g_lo * jnp.where(g_lo >= 0, i0, i_hi)
  cn_hi = c_hi * jnp.where(c_hi >= 0, f_hi, f0) + g_hi * jnp.where(g_hi >= 0, i_hi, i0)
  t_lo, t_hi = jnp.tanh(cn_lo), jnp.tanh(cn_hi)
  h_lo = t_lo * jnp.where(t_lo >= 0, o0, o_hi)
  h_hi = t_hi * jnp.where(t_hi >= 0, o_hi, o0)
  return (h_lo, h_hi, cn_lo, cn_hi), (s_lo, s_hi, g_lo, g_hi, t_lo, t_hi, c_lo, c_hi)


@jax.custom_vjp
def _unrounded_lstm_update(p_lo, p_hi, c_lo, c_hi):
  """The unrounded interval LSTM update (:meth:`IntervalDomain.lstm_update`) on the ends of p
  (..., 4H) and c (..., H): (h_lo, h_hi, c'_lo, c'_hi), with the backward pass of
  :func:`_unrounded_lstm_backward`."""
  return _unrounded_lstm_forward(p_lo, p_hi, c_lo, c_hi)[0]


def _selected(cond_lo, ct_lo, cond_hi, ct_hi):
  """Cotangents of the ends (lo, hi) of a non-negative factor x of the products
  ``y_lo · (x_lo if cond_lo else x_hi)`` and ``y_hi · (x_hi if cond_hi else x_lo)``, given
  ``ct_lo = ȳ'_lo · y_lo`` and ``ct_hi = ȳ'_hi · y_hi``: each goes to the end it selected."""
  to_lo = jnp.where(cond_lo, ct_lo, 0) + jnp.where(cond_hi, 0, ct_hi)
  to_hi = jnp.where(cond_lo, 0, ct_lo) + jnp.where(cond_hi, ct_hi, 0)
  return to_lo, to_hi


def _unrounded_lstm_backward(residuals, cotangents):
  """The derivative of :func:`_unrounded_lstm_forward`, as autodiff computes it, written out.

  Each product ``y · (x_a if y ≥ 0 else x_b)`` passes ȳ·y to the selected end of x and
  ȳ·x_selected to y; σ' = σ(1 − σ) and tanh' = 1 − tanh² are taken from the outputs (JAX's
  rules). The clamps max(σ_lo, 0) of the gates contribute no factor: σ_lo > 0 makes it 1, and
  σ_lo = 0 makes σ' = 0 anyway. Autodiff of the select-based rules gives the same numbers but
  XLA (CPU) recomputes the shared cotangents in each gate's fusion; the optimisation barriers
  make it materialise the incoming and the cell-state cotangents once.
  """
  s_lo, s_hi, g_lo, g_hi, t_lo, t_hi, c_lo, c_hi = residuals
  dh_lo, dh_hi, dc_lo, dc_hi = jax.lax.optimization_barrier(cotangents)
  (i_lo, f_lo, o_lo), (i_hi, f_hi, o_hi) = jnp.split(s_lo, 3, -1), jnp.split(s_hi, 3, -1)
  i0, f0, o0 = (jnp.maximum(v, 0) for v in (i_lo, f_lo, o_lo))
  t_pos_lo, t_pos_hi = t_lo >= 0, t_hi >= 0
  do_lo, do_hi = _selected(t_pos_lo, dh_lo * t_lo, t_pos_hi, dh_hi * t_hi)
  dn_lo = dc_lo + dh_lo * jnp.where(t_pos_lo, o0, o_hi) * jax.lax.one_minus_square(t_lo)
  dn_hi = dc_hi + dh_hi * jnp.where(t_pos_hi, o_hi, o0) * jax.lax.one_minus_square(t_hi)
  dn_lo, dn_hi = jax.lax.optimization_barrier((dn_lo, dn_hi))
  c_pos_lo, c_pos_hi = c_lo >= 0, c_hi >= 0
  df_lo, df_hi = _selected(c_pos_lo, dn_lo * c_lo, c_pos_hi, dn_hi * c_hi)
  g_pos_lo, g_pos_hi = g_lo >= 0, g_hi >= 0
  di_lo, di_hi = _selected(g_pos_lo, dn_lo * g_lo, g_pos_hi, dn_hi * g_hi)
  dg_lo = dn_lo * jnp.where(g_pos_lo, i0, i_hi) * jax.lax.one_minus_square(g_lo)
  dg_hi = dn_hi * jnp.where(g_pos_hi, i_hi, i0) * jax.lax.one_minus_square(g_hi)
  gates = lambda di, df, do, dg, s: jnp.concatenate(
      [jnp.concatenate([di, df, do], -1) * (s * (1 - s)), dg], -1)
  return (gates(di_lo, df_lo, do_lo, dg_lo, s_lo), gates(di_hi, df_hi, do_hi, dg_hi, s_hi),
          dn_lo * jnp.where(c_pos_lo, f0, f_hi), dn_hi * jnp.where(c_pos_hi, f_hi, f0))


_unrounded_lstm_update.defvjp(_unrounded_lstm_forward, _unrounded_lstm_backward)


def _unrounded_linear_forward(lo, hi, kernel, bias):
  """The unrounded :meth:`IntervalDomain.linear` of the box [lo, hi] (..., n): centre
  ((lo + hi)/2)@W + b ∓ radius ((hi − lo)/2)@|W|; returns ((lower, upper), residuals)."""
  centre, spread = _matmul_pair((lo + hi) / 2, (hi - lo) / 2, kernel, jnp.abs(kernel))
  centre = centre + bias
  return (centre - spread, centre + spread), (lo, hi, kernel)


@jax.custom_vjp
def _unrounded_linear(lo, hi, kernel, bias):
  """:func:`_unrounded_linear_forward` with the backward pass of
  :func:`_unrounded_linear_backward`: (lower, upper) ends (..., k)."""
  return _unrounded_linear_forward(lo, hi, kernel, bias)[0]


def _unrounded_linear_backward(residuals, cotangents):
  """Autodiff's cotangents of :func:`_unrounded_linear_forward`, written out: the centre's
  cotangent ḡ_lo + ḡ_hi and the spread's ḡ_hi − ḡ_lo go back through W and |W| (the derivative
  of |w| is ±1 by the sign of w, +1 at 0, as JAX's), and the kernel's is one product over all
  leading axes. On the LSTM DP's recurrent products (ARC training, CPU) the value and gradient
  of the certified features took 7% less CPU time than with autodiff's backward pass, around
  whose per-step dots XLA materialises transposed copies; the barrier keeps the two cotangents
  computed once."""
  lo, hi, kernel = residuals
  g_lo, g_hi = jax.lax.optimization_barrier(cotangents)
  n, k = kernel.shape
  d_centre, d_spread = g_lo + g_hi, g_hi - g_lo
  dx_centre = jnp.matmul(d_centre, kernel.T, precision=PRECISION) / 2
  dx_radius = jnp.matmul(d_spread, jnp.abs(kernel).T, precision=PRECISION) / 2
  rows = lambda a, width: a.reshape(-1, width)
  d_abs = jnp.matmul(rows((hi - lo) / 2, n).T, rows(d_spread, k), precision=PRECISION)
  d_kernel = (jnp.matmul(rows((lo + hi) / 2, n).T, rows(d_centre, k), precision=PRECISION)
              + jnp.where(kernel >= 0, d_abs, -d_abs))
  return dx_centre - dx_radius, dx_centre + dx_radius, d_kernel, rows(d_centre, k).sum(0)


_unrounded_linear.defvjp(_unrounded_linear_forward, _unrounded_linear_backward)


SOUND = IntervalDomain()
"""The interval domain with outward rounding: every certificate that is reported uses it."""

UNROUNDED = IntervalDomain(round_outward=False)
"""The interval domain without outward rounding: the training objectives' surrogate bounds."""

# The sound domain's rules as functions (``interval.linear(x, w, b)``, ...).
linear = SOUND.linear
margin_lower_bounds = SOUND.margin_lower_bounds
monotone = SOUND.monotone
add = SOUND.add
mul = SOUND.mul
mul_nonneg = SOUND.mul_nonneg
scale = SOUND.scale
divide = SOUND.divide
join = SOUND.join
where = SOUND.where
masked_join = SOUND.masked_join
hull = SOUND.hull
shrink_towards = SOUND.shrink_towards
softmax_weighted_sum = SOUND.softmax_weighted_sum


def _weighted_mean_error(scores: Interval, values: Interval, mask: jax.Array) -> jax.Array:
  """A bound (..., D) on the rounding error of a softmax-weighted mean, concrete or bounded.

  Floating point: with M = max_p |v_p| over the box and S the spread of the scores (largest
  upper minus smallest lower end), each computed weight exp(fl(e_p − s)) is within a relative
  η ≤ (S + 9)u of the exact one (the subtraction's error scaled by |e_p − s| ≤ S, plus the 8u
  of ``exp``); reweighting a mean by factors (1 + η_p) moves it by at most 2η/(1 − η)·M; the
  sums, the division and the weighted sum add (2P + 4)u·M (γ-bounds of sums of P nonnegative
  terms, Higham §3.1). So the concrete forward pass and our evaluation of the exact bound of
  :func:`softmax_weighted_sum` are each within (2S + 2P + 22)u·M·(1 + 1e-3) of their real
  values; we widen both ends by 8u·(4S + 4P + 16)·M + 8·tiny, more than their sum.
  """
  dtype = values.dtype
  m = jnp.max(jnp.where(mask[..., None], _magnitude(values), 0), axis=-2)
  spread = (jnp.max(jnp.where(mask, scores.hi, -jnp.inf), axis=-1)
            - jnp.min(jnp.where(mask, scores.lo, jnp.inf), axis=-1))
  spread = jnp.where(jnp.isfinite(spread), jnp.maximum(spread, 0), 0)
  coef = _const_up(8 * _unit_roundoff(dtype), dtype) * (4 * spread + 4 * values.shape[-2] + 16)
  return _up(_up(coef)[..., None] * m + np.asarray(8 * _tiny(dtype), dtype))


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
