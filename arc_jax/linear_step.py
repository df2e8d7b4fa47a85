"""Boxes between LSTM steps, a linear relaxation inside each step (CROWN-style; boxes in and out).

:class:`LinearStepDomain` is the interval domain (its values are :class:`~arc_jax.interval.Interval`
boxes and every rule is inherited, so the DP's memoization, joins and structural operations are
unchanged) with one extra rule, :meth:`LinearStepDomain.lstm_step`, that the LSTM cell hands a
whole step to (:meth:`arc_jax.nn.cells.LSTMCell.step`). Given boxes of the step's inputs
v = (h, c, x) (state, cell state, input gate pre-activations), the interval rules bound the gate
products i·g and o·tanh(c') as if their factors were independent, but i, f, o, g all depend on the
same h through W_hh. The relaxation keeps that dependence within the step:

1. every gate is bounded above and below by a linear function of its pre-activation
   p = x + W_hh h + b (:func:`_line`), hence by a linear function of v;
2. each product is bounded by a McCormick plane (:func:`_product_form`), into which the gates'
   linear bounds are substituted: c' = f·c + i·g gets linear lower and upper bounds in v;
3. tanh(c') gets linear bounds over the box of c', into which c'’s linear bounds are substituted,
   and o·tanh(c') another McCormick plane: h' gets linear bounds in v;
4. each linear bound is minimised (maximised) exactly over the input box (:func:`_concretize`),
   for two choices of McCormick planes, the better one kept per neuron; the result is intersected
   with the interval step. The boxes between steps are therefore nested in the interval DP's,
   but the head after them is compiled and rounded apart from the interval DP's own, so the
   certificate is intersected with the interval certificate too (:attr:`LinearStepDomain.refines`):
   its logit and margin bounds are never looser than the interval domain's, in floating point.

Every linear bound is a *neuron-wise* form: neuron k's bound involves only the pre-activations
p_{i,k}, p_{f,k}, p_{o,k}, p_{g,k}, the cell state c_k and a constant (:class:`Form`); the
dependence on h enters through the rows of W_hh when the form is minimised over the box.

Floating point: the bounds contain every floating-point evaluation of the step, as the interval
rules do (:mod:`arc_jax.interval`). The concrete step's own rounding errors enter as constants
(``E_p`` of the pre-activations, ``E_φ`` of σ and tanh, the products' errors), the relaxation's
lines are valid for the float slopes and anchors used (slopes rounded down, anchors outward), and
the error of computing and minimising a form in float is bounded by 2γ_{H+96} times the form's
magnitude (:func:`_concretize`), which :class:`Form` tracks alongside the form.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from arc_jax import interval as iv
from arc_jax.domain import split
from arc_jax.interval import Interval

# The ~40 float operations that build a form's coefficient from float parameters, and the
# ~20 more of minimising it, on top of the H-term dot products (see _concretize).
_FORM_DEPTH = 96


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Form:
  """Neuron-wise affine forms ``Σ_g gates[g]·p_g + state·c + const`` (one per neuron k).

  Attributes:
    gates: (..., 4, H) coefficients of the pre-activations p_i, p_f, p_o, p_g of each neuron.
    state: (..., H) coefficient of the cell state c.
    const: (..., H) the constant.
    magnitude: (gates, state, const) of the same shapes, bounds of the sums of the absolute
      values of every term that was added or scaled into each coefficient: the float error of
      computing a coefficient is at most γ_{depth} times its magnitude.
  """

  gates: jax.Array
  state: jax.Array
  const: jax.Array
  magnitude: tuple[jax.Array, jax.Array, jax.Array]

  @classmethod
  def gate(cls, index: int, slope: jax.Array, const: jax.Array, const_magnitude: jax.Array
           ) -> Form:
    """``slope · p_index + const``."""
    gates = jnp.zeros(slope.shape[:-1] + (4,) + slope.shape[-1:], slope.dtype)
    gates = gates.at[..., index, :].set(slope)
    zero = jnp.zeros_like(slope)
    return cls(gates, zero, const, (jnp.abs(gates), zero, const_magnitude))

  @classmethod
  def cell_state(cls, like: jax.Array) -> Form:
    """``c`` itself."""
    gates = jnp.zeros(like.shape[:-1] + (4,) + like.shape[-1:], like.dtype)
    one, zero = jnp.ones_like(like), jnp.zeros_like(like)
    return cls(gates, one, zero, (gates, one, zero))

  def scale(self, factor: jax.Array) -> Form:
    """``factor · form`` (factor (..., H), per neuron)."""
    m = jnp.abs(factor)
    return Form(self.gates * factor[..., None, :], self.state * factor, self.const * factor,
                (self.magnitude[0] * m[..., None, :], self.magnitude[1] * m,
                 self.magnitude[2] * m))

  def __add__(self, other: Form) -> Form:
    return Form(self.gates + other.gates, self.state + other.state, self.const + other.const,
                tuple(a + b for a, b in zip(self.magnitude, other.magnitude)))

  def shift(self, value: jax.Array, magnitude: jax.Array | None = None) -> Form:
    """``form + value`` for a constant (..., H), computed from terms whose absolute values sum
    to at most ``magnitude`` (default |value|: one rounded operation or an exact float)."""
    magnitude = jnp.abs(value) if magnitude is None else magnitude
    return Form(self.gates, self.state, self.const + value,
                (self.magnitude[0], self.magnitude[1], self.magnitude[2] + magnitude))


def _select(condition: jax.Array, x: Form, y: Form) -> Form:
  """Per neuron, ``x`` where ``condition`` (..., H) holds, else ``y``."""
  pick = lambda a, b: jnp.where(condition[..., None, :] if a.ndim > condition.ndim else condition,
                                a, b)
  return jax.tree.map(pick, x, y)


def _derivative_lower(fn, y: jax.Array) -> jax.Array:
  """A lower bound of fn'(y) ≥ 0 for fn = σ or tanh.

  σ'(y) = σ(y)·σ(−y) and tanh'(y) = 4·σ(2y)·σ(−2y) (2y is exact): products of two values each
  within 8u relative of the real ones (:data:`interval._FUNCTION_ERRORS`), so within 17u + u²
  relative (no cancellation, unlike 1 − tanh²); the bound takes off 64u relative and 4 tiny,
  rounded down, and floors at 0.
  """
  dtype = y.dtype
  d = (4 * jax.nn.sigmoid(2 * y) * jax.nn.sigmoid(-2 * y) if fn is jnp.tanh
       else jax.nn.sigmoid(y) * jax.nn.sigmoid(-y))
  u, tiny = np.finfo(dtype).eps / 2, np.finfo(dtype).tiny
  shrunk = iv.round_outward(d * np.asarray(1 - 64 * u, dtype) - np.asarray(4 * tiny, dtype), d)
  return jnp.maximum(shrunk.lo, 0)


def _chord_slope_lower(at_lo: Interval, at_hi: Interval, lo: jax.Array, hi: jax.Array
                       ) -> jax.Array:
  """A float in [0, (fn(hi) − fn(lo)) / (hi − lo)] for a nondecreasing fn, given boxes ``at_lo``,
  ``at_hi`` of fn(lo), fn(hi): the smallest rise over an upper bound of the run, rounded down
  (0 when the rise may be 0 or the run is 0)."""
  rise = iv.round_outward(at_hi.lo - at_lo.hi, at_hi.lo - at_lo.hi).lo
  run = iv.round_outward(hi - lo, hi - lo).hi
  ratio = iv.round_outward(rise / run, rise / run).lo
  return jnp.where(rise > 0, jnp.maximum(ratio, 0), 0)


Line = tuple[jax.Array, jax.Array, jax.Array]
"""(slope, point, value): the line ``value + slope·(y − point)``; slope ≥ 0."""


def _line(fn, box: Interval, at_lo: Interval, at_hi: Interval, lower: bool) -> Line:
  """A line below (``lower``) or above fn = σ or tanh on ``box``, given boxes ``at_lo``, ``at_hi``
  of fn(box.lo), fn(box.hi).

  fn is increasing and fn' is unimodal with its peak at 0 (fn convex for y ≤ 0, concave for
  y ≥ 0).

  * lower: through (lo, a ≤ fn(lo)) with slope s ≤ min(fn'(lo), chord). fn − line is ≥ 0 at lo
    with slope fn'(lo) − s ≥ 0 there; fn' − s, unimodal, changes sign at most once on the box
    after being ≥ 0 at lo (from + to −), so fn − line rises then falls: its minimum is at an end,
    and at hi it is ≥ fn(hi) − fn(lo) − chord·(hi − lo) = 0. This is the chord when lo ≥ 0
    (concave piece) and the tangent at lo when hi ≤ 0 (convex piece).
  * upper, mirrored: through (hi, b ≥ fn(hi)) with s ≤ min(fn'(hi), chord).

  (A line through the far end with slope ≥ max fn' is valid too; choosing between the two by
  their gap at the midpoint gave looser steps on the Normal LSTM, so it is not used.)

  Floating point: slopes are rounded down (:func:`_derivative_lower`,
  :func:`_chord_slope_lower`) and anchor values outward (the boxes of fn at the ends).
  """
  lo, hi = box.lo, box.hi
  chord = _chord_slope_lower(at_lo, at_hi, lo, hi)
  if lower:
    return jnp.minimum(_derivative_lower(fn, lo), chord), lo, at_lo.lo
  return jnp.minimum(_derivative_lower(fn, hi), chord), hi, at_hi.hi


def _line_form(line: Line, form: Form, error: jax.Array, lower: bool) -> Form:
  """The form of ``value + slope·(y − point) ∓ error`` with y ≥ (``lower``) or ≤ ``form``
  substituted (sound as slope ≥ 0); the constant's terms tracked in its magnitude."""
  slope, point, value = line
  sign = -1 if lower else 1
  return form.scale(slope).shift(value - slope * point + sign * error,
                                 jnp.abs(value) + slope * jnp.abs(point) + error)


def _up(x: jax.Array) -> jax.Array:
  return iv.round_outward(x, x).hi


def _magnitude(box: Interval) -> jax.Array:
  return jnp.maximum(jnp.abs(box.lo), jnp.abs(box.hi))


def _gamma(n: int, dtype) -> np.ndarray:
  return iv._const_up(iv.dot_error(n, dtype), dtype)


def _function_error(values: Interval) -> jax.Array:
  """A bound of |f̃(y) − f(y)| for σ or tanh, f̃ the implementation: 8u|f(y)| measured
  (:data:`interval._FUNCTION_ERRORS`), taken twice, plus two tiny for flushed subnormals."""
  dtype = values.dtype
  u = np.finfo(dtype).eps / 2
  return _up(_magnitude(values) * iv._const_up(16 * u, dtype)
             + np.asarray(2 * np.finfo(dtype).tiny, dtype))


@dataclasses.dataclass(frozen=True)
class _Activation:
  """A gate's box, its function's box, and its linear lower and upper forms in v."""
  box: Interval
  lower: Form
  upper: Form


def _activation(fn, index: int, pre: Interval, values: Interval, pre_error: jax.Array
                ) -> _Activation:
  """Linear bounds of the float gate fn̄(p̄) given the box ``pre`` of its float pre-activation
  p̄ = p + e, |e| ≤ ``pre_error`` (p the real pre-activation, which the forms use).

  Soundness: with a lower line ℓ of :func:`_line` (slope s ≥ 0), fn(p̄) ≥ ℓ(p̄) ≥ ℓ(p) − s·E_p,
  and the implementation fn̄(p̄) ≥ fn(p̄) − E_φ (:func:`_function_error`). Likewise above.
  """
  at_lo = iv.monotone(fn, Interval(pre.lo, pre.lo))
  at_hi = iv.monotone(fn, Interval(pre.hi, pre.hi))
  error = _function_error(values)
  forms = []
  for lower in (True, False):
    slope, point, value = _line(fn, pre, at_lo, at_hi, lower)
    sign = -1 if lower else 1
    forms.append(Form.gate(index, slope, value - slope * point + sign * (slope * pre_error + error),
                           jnp.abs(value) + slope * jnp.abs(point) + slope * pre_error + error))
  return _Activation(values, *forms)


def _times(factor: jax.Array, x: _Activation, lower: bool) -> Form:
  """A form bounding ``factor · x`` from below (``lower``) or above: factor times x's lower form
  where that is the right side (factor ≥ 0 for a lower bound), else its upper form."""
  use_lower = (factor >= 0) == lower
  return _select(use_lower, x.lower, x.upper).scale(factor)


def _product_form(x: _Activation, y: _Activation, lower: bool, plane: int) -> Form:
  """A McCormick plane of x·y with the forms of x and y substituted.

  For x ∈ [xl, xu], y ∈ [yl, yu] the real identities
  x·y − (xl·y + yl·x − xl·yl) = (x − xl)(y − yl) ≥ 0, x·y − (xu·y + yu·x − xu·yu) ≥ 0 (lower planes
  0, 1) and (xu·y + yl·x − xu·yl) − x·y = (xu − x)(y − yl) ≥ 0, (xl·y + yu·x − xl·yu) − x·y ≥ 0
  (upper planes 0, 1) hold for the float ends used. Each linear term ``a·y`` is then bounded by
  :func:`_times`, the constant ``−a_x·a_y`` enters the form (its rounding tracked by the form's
  magnitude).
  """
  if lower:
    ax, ay = (x.box.lo, y.box.lo) if plane == 0 else (x.box.hi, y.box.hi)
  else:
    ax, ay = (x.box.hi, y.box.lo) if plane == 0 else (x.box.lo, y.box.hi)
  return (_times(ax, y, lower) + _times(ay, x, lower)).shift(-ax * ay)


@dataclasses.dataclass(frozen=True)
class _Inputs:
  """The step's input box in centre-radius form, the kernel by gate, and shared products."""
  h: tuple[jax.Array, jax.Array]
  c: tuple[jax.Array, jax.Array]
  x: tuple[jax.Array, jax.Array]  # (..., 4, H)
  bias: jax.Array  # (4, H)
  kernel: jax.Array  # (H, 4, H): [j, gate, k]
  h_centre_image: jax.Array  # (..., 4, H): h_centre @ W
  h_magnitude_image: jax.Array  # (..., 4, H): an upper bound of (|h_centre| + h_radius) @ |W|


def _gate_axis(a: jax.Array) -> jax.Array:
  return a.reshape(a.shape[:-1] + (4, a.shape[-1] // 4))


def _inputs(h: Interval, c: Interval, x: Interval, kernel: jax.Array, bias: jax.Array) -> _Inputs:
  hc, hr = iv._centre_radius(h)
  h_mag = _up(jnp.abs(hc) + hr)
  return _Inputs((hc, hr), iv._centre_radius(c),
                 tuple(_gate_axis(a) for a in iv._centre_radius(x)), _gate_axis(bias),
                 _gate_axis(kernel),
                 _gate_axis(jnp.matmul(hc, kernel, precision=iv.PRECISION)),
                 _gate_axis(iv._nonneg_matmul_upper(h_mag, jnp.abs(kernel))))


def _concretize(form: Form, v: _Inputs, lower: bool) -> jax.Array:
  """min (``lower``) or max over the input box of the real form, as a float bound (..., H).

  With p_g = x_g + W_gᵀh + b_g and A_{jk} = Σ_g a_{g,k} W_{j,g,k}, the form is
  Σ_g a_g (x_g + b_g) + A·h + a_c·c + const, whose minimum over the box (centres, radii
  r ≥ the real half-widths) is Σ_g a_g(x̂_g + b_g) + (ĥ @ W)·a + a_c ĉ + const −
  (Σ_g |a_g| r_{x,g} + |A|·r_h + |a_c| r_c): exact in reals (each term is minimised at its own
  coordinate). Floating point: the computed coefficients differ from the real ones by at most
  γ_{96} times their tracked magnitudes (each is a sum of at most ~40 rounded products, each
  bounded by the magnitude), and the evaluation is a sum of H + ~20 rounded products; all of it
  is at most γ_{H+96}·M, M the magnitude form evaluated at the largest |v| in the box, computed
  here (≥ M(1 − γ)) and taken twice, rounded up, and subtracted (added) outward.
  """
  (hc, hr), (cc, cr), (xc, xr) = v.h, v.c, v.x
  a, m = form.gates, form.magnitude
  value = (jnp.sum(a * (xc + v.bias + v.h_centre_image), axis=-2) + form.state * cc + form.const)
  coupled = jnp.einsum("...gk,jgk->...jk", a, v.kernel, precision=iv.PRECISION)
  spread = (jnp.sum(jnp.abs(a) * xr, axis=-2) + jnp.abs(form.state) * cr
            + jnp.einsum("...jk,...j->...k", jnp.abs(coupled), hr, precision=iv.PRECISION))
  dtype = value.dtype
  magnitude = (jnp.sum(m[0] * (jnp.abs(xc) + xr + jnp.abs(v.bias) + v.h_magnitude_image),
                       axis=-2) + m[1] * (jnp.abs(cc) + cr) + m[2])
  hidden = v.kernel.shape[0]
  error = _up(_up(magnitude) * (2 * _gamma(hidden + _FORM_DEPTH, dtype))
              + np.asarray(16 * np.finfo(dtype).tiny, dtype))
  if lower:
    return iv.round_outward(value - spread - error, value).lo
  return iv.round_outward(value, value + spread + error).hi


def _best(forms: list[Form], v: _Inputs, lower: bool) -> tuple[jax.Array, Form]:
  """The tightest of several valid bounds per neuron, and the form that gives it."""
  bounds = [_concretize(f, v, lower) for f in forms]
  best, form = bounds[0], forms[0]
  for bound, other in zip(bounds[1:], forms[1:]):
    better = bound > best if lower else bound < best
    best, form = jnp.where(better, bound, best), _select(better, other, form)
  return best, form


@dataclasses.dataclass(frozen=True)
class LinearStepDomain(iv.IntervalDomain):
  """The sound interval domain with a linear relaxation inside each LSTM step (module docstring).

  Only the outward-rounded variant exists (certificates; ``round_outward`` must stay True).
  """

  @property
  def refines(self) -> iv.IntervalDomain:
    """The sound interval domain: certificates are intersected with its own, so they are never
    looser, exactly (the boxes between steps are nested, but the head is rounded differently)."""
    return iv.SOUND

  def __post_init__(self):
    if not self.round_outward:
      raise ValueError("LinearStepDomain is for certificates and rounds outward; use "
                       "interval.UNROUNDED for unrounded training bounds.")

  def lstm_step(self, carry: tuple[iv.Value, iv.Value], gates_in: iv.Value,
                recurrent: iv.Value | None, kernel: jax.Array, bias: jax.Array
                ) -> tuple[iv.Value, iv.Value]:
    """One LSTM step (gate layout [i | f | o | g], :class:`arc_jax.nn.cells.LSTMCell`) from boxes
    of ``carry`` = (h, c) (..., H) and ``gates_in`` (..., 4H), with W_hh = ``kernel`` (H, 4H) and
    b_hh = ``bias``; ``recurrent`` the box of h @ W_hh + b_hh if known.

    Returns the boxes (h', c'), each the intersection of the interval step's box and the linear
    relaxation's (both sound, module docstring); concrete inputs give the concrete step.
    """
    h, c = carry
    recurrent = self.linear(h, kernel, bias) if recurrent is None else recurrent
    pre = self.add(gates_in, recurrent)
    blocks = split(pre, 4)
    fns = (jax.nn.sigmoid, jax.nn.sigmoid, jax.nn.sigmoid, jnp.tanh)
    i, f, o, g = (self.monotone(fn, p) for fn, p in zip(fns, blocks))
    c_box = self.add(self.mul_nonneg(f, c), self.mul_nonneg(i, g))
    if not any(iv.is_interval(a) for a in (h, c, gates_in, recurrent)):
      return self.mul_nonneg(o, self.monotone(jnp.tanh, c_box)), c_box
    h, c, x = iv.as_interval(h), iv.as_interval(c), iv.as_interval(gates_in)
    dtype = h.dtype
    v = _inputs(h, c, x, kernel, bias)
    # E_p: the float pre-activation x + (h @ W + b) is within γ_{H+2}(|h|@|W| + |b| + |x|) of the
    # real x + W h + b (dot_error, the bias and x as two more terms); taken twice.
    pre_error = _up(_gamma(kernel.shape[0] + 2, dtype) * 2 * _up(
        _up(v.h_magnitude_image + jnp.abs(v.bias)) + _gate_axis(_magnitude(x))))
    acts = [_activation(fn, k, Interval(*(_gate_axis(a)[..., k, :] for a in (pre.lo, pre.hi))),
                        box, pre_error[..., k, :]) for k, (fn, box) in enumerate(zip(fns,
                                                                                    (i, f, o, g)))]
    a_i, a_f, a_o, a_g = acts
    a_c = _Activation(c, Form.cell_state(c.lo), Form.cell_state(c.lo))
    tiny = np.asarray(np.finfo(dtype).tiny, dtype)
    # c̄' = fl(fl(f̄c) + fl(īḡ)) is within γ_3(|f||c| + |i||g|) (+ 3 tiny) of f̄c + īḡ; twice.
    c_error = _up(_gamma(3, dtype) * 2 * _up(_magnitude(f) * _magnitude(c) + _magnitude(i)
                                                * _magnitude(g)) + 4 * tiny)
    c_lo, c_lower = _best([(_product_form(a_f, a_c, True, p) + _product_form(a_i, a_g, True, p))
                           .shift(-c_error) for p in (0, 1)], v, True)
    c_hi, c_upper = _best([(_product_form(a_f, a_c, False, p) + _product_form(a_i, a_g, False, p))
                           .shift(c_error) for p in (0, 1)], v, False)
    # fmax / fmin: a NaN bound (none is expected) falls back to the interval step's end.
    c_new = Interval(jnp.fmax(c_box.lo, c_lo), jnp.fmin(c_box.hi, c_hi))
    # tanh(c̄'): lines over the box of c̄', into which c̄'’s forms are substituted (slopes ≥ 0).
    t_box = self.monotone(jnp.tanh, c_new)
    at_lo = self.monotone(jnp.tanh, Interval(c_new.lo, c_new.lo))
    at_hi = self.monotone(jnp.tanh, Interval(c_new.hi, c_new.hi))
    t_error = _function_error(t_box)
    t_lower = _line_form(_line(jnp.tanh, c_new, at_lo, at_hi, True), c_lower, t_error, True)
    t_upper = _line_form(_line(jnp.tanh, c_new, at_lo, at_hi, False), c_upper, t_error, False)
    a_t = _Activation(t_box, t_lower, t_upper)
    # h̄' = fl(ō·t̄) is within u|o||t| (+ tiny) of ō·t̄; twice.
    h_error = _up(_gamma(1, dtype) * 2 * _up(_magnitude(o) * _magnitude(t_box)) + 2 * tiny)
    h_lo, _ = _best([_product_form(a_o, a_t, True, p).shift(-h_error) for p in (0, 1)], v, True)
    h_hi, _ = _best([_product_form(a_o, a_t, False, p).shift(h_error) for p in (0, 1)], v, False)
    # The interval domain's fused step (IntervalDomain.lstm_update) is sound too: intersect with
    # it, so the result is never looser than the interval DP's step.
    h_fused, c_fused = iv.IntervalDomain.lstm_update(self, gates_in, recurrent, c)
    h_box = self.mul_nonneg(o, t_box)
    h_new = Interval(jnp.fmax(jnp.maximum(h_box.lo, h_fused.lo), h_lo),
                     jnp.fmin(jnp.minimum(h_box.hi, h_fused.hi), h_hi))
    c_new = Interval(jnp.maximum(c_new.lo, c_fused.lo), jnp.minimum(c_new.hi, c_fused.hi))
    return h_new, c_new


LINEAR_STEP = LinearStepDomain()
"""The linear-step domain: intervals between steps, a sound linear relaxation inside each."""
