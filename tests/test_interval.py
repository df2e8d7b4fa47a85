"""Each interval rule encloses sampled concrete results, and a point interval is exact."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from arc_jax import interval as iv
from tests.helpers.jit_variants import assert_boxes_enclose, assert_same_result, points_in



@pytest.fixture(autouse=True, scope="module")
def float64():
  """Float64 for this module only (exact comparisons with enumerated strings)."""
  with jax.enable_x64(True):
    yield


def random_box(rng, shape, scale):
  a, b = rng.normal(size=shape) * scale, rng.normal(size=shape) * scale
  return iv.Interval(jnp.asarray(np.minimum(a, b)), jnp.asarray(np.maximum(a, b)))


def samples_in(rng, box, n=64):
  """Random points of the box, including its corners' coordinates."""
  u = rng.uniform(size=(n,) + box.shape)
  u[0], u[1] = 0.0, 1.0
  lo, hi = np.asarray(box.lo), np.asarray(box.hi)
  return lo + u * (hi - lo)


def assert_encloses(box, values, tol=1e-12):
  assert np.all(np.asarray(box.lo) <= values + tol), "a concrete value is below the lower bound"
  assert np.all(values <= np.asarray(box.hi) + tol), "a concrete value is above the upper bound"


seeds = st.integers(0, 2**31 - 1)
scales = st.sampled_from([0.1, 1.0, 10.0])


@settings(max_examples=30, deadline=None)
@given(seeds, scales)
def test_linear_encloses_samples(seed, scale):
  rng = np.random.default_rng(seed)
  x = random_box(rng, (3, 5), scale)
  w, b = rng.normal(size=(5, 4)) * scale, rng.normal(size=(4,))
  xs = samples_in(rng, x)
  assert_encloses(iv.linear(x, jnp.asarray(w), jnp.asarray(b)), xs @ w + b)


@settings(max_examples=30, deadline=None)
@given(seeds, scales, st.sampled_from([jax.nn.relu, jax.nn.sigmoid, jnp.tanh, jnp.exp]))
def test_monotone_encloses_samples(seed, scale, fn):
  rng = np.random.default_rng(seed)
  x = random_box(rng, (4, 3), min(scale, 3.0))
  assert_encloses(iv.monotone(fn, x), np.asarray(fn(samples_in(rng, x))))


@settings(max_examples=30, deadline=None)
@given(seeds, scales)
def test_mul_and_add_enclose_samples(seed, scale):
  rng = np.random.default_rng(seed)
  x, y = random_box(rng, (6,), scale), random_box(rng, (6,), scale)
  xs, ys = samples_in(rng, x), samples_in(rng, y)[::-1]
  assert_encloses(iv.mul(x, y), xs * ys)
  assert_encloses(iv.add(x, y), xs + ys)


def test_mul_is_tight_on_corners_up_to_one_rounding():
  """The product box is the tightest up to outward rounding: its ends are corner products."""
  x = iv.Interval(jnp.array([-2.0]), jnp.array([3.0]))
  y = iv.Interval(jnp.array([-5.0]), jnp.array([1.0]))
  prod = iv.mul(x, y)
  assert np.nextafter(-15.0, -1e9, dtype=np.float64) >= float(prod.lo[0]) >= -15.0 - 1e-14
  assert np.nextafter(10.0, 1e9, dtype=np.float64) <= float(prod.hi[0]) <= 10.0 + 1e-14


def ulps_apart(a, b):
  """How many floats of a's dtype lie between a and b (elementwise, finite values)."""
  a, b = np.asarray(a), np.asarray(b)
  info = np.iinfo(np.int32 if a.dtype == np.float32 else np.int64)
  ints = lambda v: (lambda i: np.where(i < 0, info.min - i, i))(
      v.view(np.int32 if a.dtype == np.float32 else np.int64).astype(np.int64))
  return np.abs(ints(a) - ints(b))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("scale", [1.0, 10.0, 1000.0])
def test_point_linear_contains_every_evaluation_and_is_narrow(dtype, scale):
  """A point box contains the concrete product of any shape (XLA may round differently per
  shape) and the exact one, and is at most ~(4γ_n + 8u)·|x|·|W| wide."""
  rng = np.random.default_rng(0)
  n = 300
  x = (rng.normal(size=(64, n)) * scale).astype(dtype)
  w = (rng.normal(size=(n, 50)) * scale).astype(dtype)
  b = (rng.normal(size=(50,)) * scale).astype(dtype)
  box = iv.linear(iv.point(jnp.asarray(x)), jnp.asarray(w), jnp.asarray(b))
  exact = (x.astype(np.longdouble) @ w.astype(np.longdouble)) + b
  for concrete in (iv.linear(jnp.asarray(x), jnp.asarray(w), jnp.asarray(b)),
                   jax.vmap(lambda r: iv.linear(r, jnp.asarray(w), jnp.asarray(b)))(x),
                   jnp.asarray(x[:1]) @ jnp.asarray(w) + b):
    c = np.asarray(concrete)
    assert np.all(np.asarray(box.lo)[:len(c)] <= c) and np.all(c <= np.asarray(box.hi)[:len(c)])
  assert np.all(np.asarray(box.lo) <= exact) and np.all(exact <= np.asarray(box.hi))
  u = np.finfo(dtype).eps / 2
  bound = (4 * iv.dot_error(n + 1, dtype) + 8 * u) * (np.abs(x) @ np.abs(w) + np.abs(b)) * 1.01
  assert np.all(np.asarray(box.hi) - np.asarray(box.lo) <= bound + 8 * np.finfo(dtype).tiny)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_elementwise_point_rules_are_a_few_ulps_wide(dtype):
  rng = np.random.default_rng(3)
  x = jnp.asarray((rng.normal(size=(1000,)) * 5).astype(dtype))
  for box, concrete in ((iv.mul(iv.point(x), iv.point(2 * x)), x * (2 * x)),
                        (iv.add(iv.point(x), iv.point(x ** 3)), x + x ** 3),
                        (iv.monotone(jnp.tanh, iv.point(x)), jnp.tanh(x))):
    assert np.all(box.lo <= concrete) and np.all(concrete <= box.hi)
    assert np.max(ulps_apart(box.lo, box.hi)) <= 80


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn,ref,bounds", [
    (jnp.tanh, np.tanh, (-1, 1)),
    (jax.nn.sigmoid, lambda v: 1 / (1 + np.exp(-v)), (0, 1)),
    (jnp.exp, np.exp, (0, np.inf))])
def test_elementwise_functions_are_within_the_assumed_error(dtype, fn, ref, bounds):
  """interval.monotone widens by 32u, assuming XLA's functions are within 8u of the truth and
  inside their range: checked on a dense grid, saturation and tiny values included."""
  rng = np.random.default_rng(0)
  x = np.concatenate([rng.normal(size=200_000) * s for s in (1e-3, 1, 5, 30)]
                     + [np.linspace(-90, 90, 200_001), [0.0, 1e-30, -1e-30, 1e-40]]).astype(dtype)
  if fn is jnp.exp:
    x = x[x < np.log(np.finfo(dtype).max) - 1]
  y = np.asarray(jax.jit(fn)(jnp.asarray(x)))
  truth = ref(x.astype(np.longdouble))
  u, tiny = np.finfo(dtype).eps / 2, np.finfo(dtype).tiny
  assert np.all(np.abs(y - truth) <= 8 * u * np.abs(truth) + tiny)
  assert np.all((bounds[0] <= y) & (y <= bounds[1]))


@settings(max_examples=30, deadline=None)
@given(seeds, st.sampled_from([1.0, 10.0, 1e4]))
def test_float32_linear_with_large_weights_encloses_exact_and_concrete(seed, scale):
  rng = np.random.default_rng(seed)
  a, b = (rng.normal(size=(2, 8, 100)) * scale).astype(np.float32)
  x = iv.Interval(jnp.asarray(np.minimum(a, b)), jnp.asarray(np.maximum(a, b)))
  w = (rng.normal(size=(100, 7)) * scale).astype(np.float32)
  bias = (rng.normal(size=(7,)) * scale).astype(np.float32)
  out = iv.linear(x, jnp.asarray(w), jnp.asarray(bias))
  xs = samples_in(rng, x, n=16).astype(np.float32)
  concrete = np.asarray(jnp.asarray(xs) @ jnp.asarray(w) + bias)
  exact = xs.astype(np.longdouble) @ w.astype(np.longdouble) + bias
  for values in (concrete, exact):
    assert np.all(np.asarray(out.lo) <= values) and np.all(values <= np.asarray(out.hi))


@settings(max_examples=30, deadline=None)
@given(seeds, st.sampled_from([1.0, 10.0, 1e3]), st.sampled_from([np.float32, np.float64]))
def test_margin_lower_bounds_bound_concrete_logit_differences(seed, scale, dtype):
  rng = np.random.default_rng(seed)
  a, b = (rng.normal(size=(2, 6, 40)) * scale).astype(dtype)
  x = iv.Interval(jnp.asarray(np.minimum(a, b)), jnp.asarray(np.maximum(a, b)))
  w = (rng.normal(size=(40, 3)) * scale).astype(dtype)
  bias = (rng.normal(size=(3,)) * scale).astype(dtype)
  margins = np.asarray(iv.margin_lower_bounds(x, jnp.asarray(w), jnp.asarray(bias)))
  xs = samples_in(rng, x, n=16).astype(dtype)
  z = np.asarray(jnp.asarray(xs) @ jnp.asarray(w) + bias)
  assert np.all(margins <= z[..., :, None] - z[..., None, :])
  exact = xs.astype(np.longdouble) @ w.astype(np.longdouble) + bias
  assert np.all(margins <= exact[..., :, None] - exact[..., None, :])


def test_join_and_masked_join_ignore_bottom():
  a = iv.Interval(jnp.array([[0.0, 1.0]]), jnp.array([[1.0, 2.0]]))
  b = iv.Interval(jnp.array([[-5.0, 0.5]]), jnp.array([[-4.0, 9.0]]))
  j = iv.join(a, b)
  np.testing.assert_array_equal(j.lo, [[-5.0, 0.5]])
  np.testing.assert_array_equal(j.hi, [[1.0, 9.0]])
  out, valid = iv.masked_join(a, jnp.array([True]), b, jnp.array([False]))
  np.testing.assert_array_equal(out.lo, a.lo)
  np.testing.assert_array_equal(out.hi, a.hi)
  assert bool(valid[0])
  out, valid = iv.masked_join(a, jnp.array([False]), b, jnp.array([True]))
  np.testing.assert_array_equal(out.lo, b.lo)
  out, valid = iv.masked_join(a, jnp.array([False]), b, jnp.array([False]))
  assert not bool(valid[0])


def test_hull_covers_masked_members_and_empty_is_finite():
  rng = np.random.default_rng(1)
  values = jnp.asarray(rng.normal(size=(2, 4, 3)))
  mask = jnp.array([[True, False, True, False], [False, False, False, False]])
  box = iv.hull(values, mask, axis=1, empty=jnp.zeros((2, 3)))
  np.testing.assert_allclose(box.lo[0], np.minimum(values[0, 0], values[0, 2]))
  np.testing.assert_allclose(box.hi[0], np.maximum(values[0, 0], values[0, 2]))
  np.testing.assert_array_equal(box.lo[1], 0.0)
  np.testing.assert_array_equal(box.hi[1], 0.0)


@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0])
def test_shrink_towards_interpolates_between_anchor_and_box(eps):
  box = iv.Interval(jnp.array([1.0, -2.0]), jnp.array([3.0, -1.0]))
  anchor = jnp.array([2.0, 0.0])
  out = iv.shrink_towards(box, anchor, eps)
  np.testing.assert_allclose(out.lo, anchor + eps * (box.lo - anchor), rtol=1e-14, atol=1e-300)
  np.testing.assert_allclose(out.hi, anchor + eps * (box.hi - anchor), rtol=1e-14, atol=1e-300)
  assert np.all(np.asarray(out.lo) <= np.asarray(out.hi))


@settings(max_examples=30, deadline=None)
@given(seeds, st.sampled_from([np.float32, np.float64]))
def test_shrink_at_eps_one_contains_the_box_exactly(seed, dtype):
  """The ε-shrink at ε = 1 must not lose hull ends to rounding (issue 12's second escape)."""
  rng = np.random.default_rng(seed)
  a, b = (rng.normal(size=(2, 500)) * 10).astype(dtype)
  box = iv.Interval(jnp.asarray(np.minimum(a, b)), jnp.asarray(np.maximum(a, b)))
  anchor = jnp.asarray((rng.normal(size=500) * 1e3).astype(dtype))
  out = iv.shrink_towards(box, anchor, jnp.asarray(1.0, dtype))
  assert np.all(out.lo <= box.lo) and np.all(box.hi <= out.hi)


@given(seeds, scales)
def test_mul_nonneg_encloses_samples_and_the_four_corner_box(seed, scale):
  rng = np.random.default_rng(seed)
  x, y = random_box(rng, (4, 3), scale), random_box(rng, (4, 3), scale)
  gate = iv.monotone(jax.nn.sigmoid, x)  # non-negative, as the LSTM's gates
  box = iv.mul_nonneg(gate, y)
  inside = lambda b: np.clip(samples_in(rng, b), b.lo, b.hi)  # samples_in may round past an end
  assert_encloses(box, inside(gate) * inside(y), tol=0.0)
  corners = iv.mul(gate, y)
  assert np.all(np.asarray(box.lo) <= np.asarray(corners.lo))
  assert np.all(np.asarray(box.hi) >= np.asarray(corners.hi))
  # Tight: at most the outward rounding wider than the four corners' box.
  np.testing.assert_array_max_ulp(box.lo, corners.lo, maxulp=1)
  np.testing.assert_array_max_ulp(box.hi, corners.hi, maxulp=1)


def test_mul_nonneg_of_arrays_is_the_product():
  x, y = jnp.asarray([0.0, 0.5, 1.0]), jnp.asarray([-2.0, 3.0, -0.25])
  np.testing.assert_array_equal(iv.mul_nonneg(x, y), x * y)


def _cell_exact(gates, c):
  """The LSTM update in long double (≈ real arithmetic): gates (..., 4H), c (..., H)."""
  i, f, o, g = np.split(gates.astype(np.longdouble), 4, -1)
  sig = lambda v: 1 / (1 + np.exp(-v))
  c_new = sig(f) * c.astype(np.longdouble) + sig(i) * np.tanh(g)
  return sig(o) * np.tanh(c_new), c_new


@settings(max_examples=25, deadline=None)
@given(seeds, st.sampled_from([np.float32, np.float64]), st.sampled_from([0.3, 3.0, 30.0, 1e3]))
def test_fused_lstm_update_encloses_float_and_exact_cells(seed, dtype, scale):
  """The sound domain's fused LSTM update (one absolute widening per quantity) encloses, without
  tolerance, the float cell of every sampled point (corners included) of the gate and state
  boxes, in the model's dtype, and the exact cell; saturated gates and wide states included."""
  rng = np.random.default_rng(seed)
  cast = lambda box: iv.Interval(jnp.asarray(box.lo, dtype), jnp.asarray(box.hi, dtype))
  gates_in, recurrent = (cast(random_box(rng, (2, 8), scale)) for _ in range(2))
  c = cast(random_box(rng, (2, 2), min(scale, 30.0)))
  h_box, c_box = iv.SOUND.lstm_update(gates_in, recurrent, c)
  for _ in range(4):
    g, r, cs = (np.clip(samples_in(rng, b, n=16).astype(dtype), b.lo, b.hi)
                for b in (gates_in, recurrent, c))
    h_float, c_float = iv.UNROUNDED.lstm_update(jnp.asarray(g), jnp.asarray(r), jnp.asarray(cs))
    h_exact, c_exact = _cell_exact(g.astype(np.longdouble) + r, cs)
    for box, values in ((h_box, h_float), (c_box, c_float), (h_box, h_exact), (c_box, c_exact)):
      assert_encloses(box, np.asarray(values), tol=0.0)


@settings(max_examples=20, deadline=None)
@given(seeds, st.sampled_from([0.3, 3.0, 1e3]))
def test_unrounded_lstm_update_backward_equals_autodiff(seed, scale):
  """The hand-written backward pass of the unrounded LSTM update gives autodiff's cotangents of
  the same forward pass (float64): mixed-sign and point boxes, states and gates at exactly 0
  (the selects' ties) and saturated gates (σ = 0, where the clamp max(σ, 0) ties) included."""
  rng = np.random.default_rng(seed)
  with jax.enable_x64(True):
    p, c = random_box(rng, (6, 3, 16), scale), random_box(rng, (6, 3, 4), min(scale, 30.0))
    p = iv.Interval(p.lo.at[0].set(p.hi[0]), p.hi)  # a point box
    c = iv.Interval(c.lo.at[1].set(0.0), c.hi.at[2].set(0.0))
    p = iv.Interval(p.lo.at[3, :, 12:].set(0.0).at[4].set(-1e3), p.hi)
    args = (p.lo, p.hi, c.lo, c.hi)
    cotangents = tuple(jnp.asarray(rng.normal(size=a.shape)) for a in (c.lo,) * 4)
    out, vjp = jax.vjp(iv._unrounded_lstm_update, *args)  # pylint: disable=protected-access
    forward = iv._unrounded_lstm_forward  # pylint: disable=protected-access
    ref_out, ref_vjp = jax.vjp(lambda *a: forward(*a)[0], *args)
    for a, b in zip(out + vjp(cotangents), ref_out + ref_vjp(cotangents)):
      assert a.dtype == np.float64
      np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("seed", [0, 1])
def test_unrounded_linear_backward_equals_autodiff(seed):
  """The hand-written backward pass of the unrounded affine map gives autodiff's cotangents of
  the same forward pass (float64; leading axes, a point box and zero weights included)."""
  rng = np.random.default_rng(seed)
  with jax.enable_x64(True):
    x = random_box(rng, (3, 2, 5), 2.0)
    x = iv.Interval(x.lo.at[0, 0].set(x.hi[0, 0]), x.hi)
    kernel = jnp.asarray(rng.normal(size=(5, 4))).at[1, 2].set(0.0)
    args = (x.lo, x.hi, kernel, jnp.asarray(rng.normal(size=4)))
    cotangents = tuple(jnp.asarray(rng.normal(size=(3, 2, 4))) for _ in range(2))
    out, vjp = jax.vjp(iv._unrounded_linear, *args)  # pylint: disable=protected-access
    forward = iv._unrounded_linear_forward  # pylint: disable=protected-access
    ref_out, ref_vjp = jax.vjp(lambda *a: forward(*a)[0], *args)
    for a, b in zip(out + vjp(cotangents), ref_out + ref_vjp(cotangents)):
      assert a.dtype == np.float64 and a.shape == b.shape
      np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_lstm_update_of_a_point_is_narrow(dtype):
  """A point's box is a few tens of ulps of 1 wide (the widenings are absolute)."""
  rng = np.random.default_rng(1)
  gates, c = (jnp.asarray(rng.normal(size=s) * 3, dtype) for s in ((64, 16), (64, 4)))
  zero = jnp.zeros_like(gates)
  for box, concrete in zip(iv.SOUND.lstm_update(iv.point(gates), iv.point(zero), iv.point(c)),
                           iv.UNROUNDED.lstm_update(gates, zero, c)):
    assert np.all(box.lo <= concrete) and np.all(concrete <= box.hi)
    assert np.max(np.asarray(box.hi - box.lo)) <= 100 * np.finfo(dtype).eps * (
        1 + np.max(np.abs(np.asarray(c))))


class RulesJittedOrNotTest(chex.TestCase):
  """The interval rules are pure: jitted and not (chex variants) they give the same boxes, exact
  for the rules that only select or compare ends, and in both the boxes enclose the concrete
  results of the same rules on sampled points, evaluated under the same variant."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_rules_agree_jitted_or_not_and_stay_sound(self):
    rng = np.random.default_rng(7)
    x, y = random_box(rng, (3, 5), 2.0), random_box(rng, (3, 5), 2.0)
    gates, recurrent, c = (random_box(rng, s, 2.0) for s in ((3, 8), (3, 8), (3, 2)))
    w, b = jnp.asarray(rng.normal(size=(5, 4))), jnp.asarray(rng.normal(size=4))
    gate = iv.Interval(jax.nn.sigmoid(y.lo), jax.nn.sigmoid(y.hi))  # nonnegative
    condition = jnp.asarray(rng.random((3, 5)) < 0.5)
    cases = {  # name: (rule, boxed arguments, exact)
        "linear": (lambda a: iv.linear(a, w, b), (x,), False),
        "add": (iv.add, (x, y), False),
        "mul": (iv.mul, (x, y), False),
        "mul_nonneg": (iv.mul_nonneg, (gate, x), False),
        "scale": (lambda a: iv.scale(a, jnp.abs(w[0, 0]) + 0.5), (x,), False),
        "relu": (lambda a: iv.monotone(jax.nn.relu, a), (x,), True),
        "sigmoid": (lambda a: iv.monotone(jax.nn.sigmoid, a), (x,), False),
        "tanh": (lambda a: iv.monotone(jnp.tanh, a), (x,), False),
        "exp": (lambda a: iv.monotone(jnp.exp, a), (x,), False),
        "lstm_update": (iv.SOUND.lstm_update, (gates, recurrent, c), False),
        "join": (iv.join, (x, y), True),
        "where": (lambda a, z: iv.where(condition, a, z), (x, y), True),
    }
    for name, (rule, boxes, exact) in cases.items():
      with self.subTest(name):
        out = self.variant(rule)(*boxes)
        assert_same_result(out, rule(*boxes), exact)
        chex.assert_type(jax.tree.leaves(out), float)
        if name == "join":  # either argument's points lie in the join
          assert_boxes_enclose(out, points_in(rng, x))
          assert_boxes_enclose(out, points_in(rng, y))
          continue
        points = [jnp.asarray(points_in(rng, box)) for box in boxes]
        assert_boxes_enclose(out, self.variant(rule)(*points))

  @chex.variants(with_jit=True, without_jit=True)
  def test_hull_is_the_same_jitted_or_not(self):
    rng = np.random.default_rng(8)
    values = random_box(rng, (2, 4, 3), 1.0)
    mask = jnp.asarray([[True, False, True, True], [False, False, False, False]])
    empty = iv.point(jnp.zeros((2, 3)))
    hull = self.variant(lambda v, m: iv.hull(v, m, axis=1, empty=empty))(values, mask)
    assert_same_result(hull, iv.hull(values, mask, axis=1, empty=empty), exact=True)
    chex.assert_shape([hull.lo, hull.hi], (2, 3))
    for r in (0, 2, 3):  # row 0's candidates
      assert_boxes_enclose(hull[0], values.lo[0, r])
      assert_boxes_enclose(hull[0], values.hi[0, r])
    chex.assert_trees_all_equal(hull[1], empty[1])  # no candidate: the empty point
