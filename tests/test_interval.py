"""Each interval rule encloses sampled concrete results, and a point interval is exact."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from arc_jax import interval as iv



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


def test_mul_is_exact_on_corners():
  """The product box is the tightest: its ends are attained by corner products."""
  x = iv.Interval(jnp.array([-2.0]), jnp.array([3.0]))
  y = iv.Interval(jnp.array([-5.0]), jnp.array([1.0]))
  prod = iv.mul(x, y)
  assert float(prod.lo[0]) == -15.0 and float(prod.hi[0]) == 10.0


def test_point_intervals_are_exact():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(3, 5)))
  w, b = jnp.asarray(rng.normal(size=(5, 4))), jnp.asarray(rng.normal(size=(4,)))
  p = iv.linear(iv.point(x), w, b)
  np.testing.assert_array_equal(p.lo, x @ w + b)
  np.testing.assert_array_equal(p.hi, x @ w + b)
  m = iv.mul(iv.point(x), iv.point(2 * x))
  np.testing.assert_array_equal(m.lo, x * (2 * x))
  np.testing.assert_array_equal(m.hi, x * (2 * x))


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
  np.testing.assert_allclose(out.lo, anchor + eps * (box.lo - anchor))
  np.testing.assert_allclose(out.hi, anchor + eps * (box.hi - anchor))
  assert np.all(np.asarray(out.lo) <= np.asarray(out.hi))


@settings(max_examples=30, deadline=None)
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
