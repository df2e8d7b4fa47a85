"""Helpers of the chex-variant tests: a pure function gives the same result jitted and not."""

import chex
import jax
import numpy as np

from arc_jax import interval as iv


def assert_same_result(variant_out, eager_out, exact: bool):
  """``variant_out`` (under ``self.variant``) has the structure, shapes and dtypes of the eager
  ``eager_out``, and its values: equal when ``exact`` (the computation involves no rounding, or
  is one XLA op either way), else within 8 ulps (XLA may fuse a jitted program's elementwise
  ops differently from their one-op eager programs; the rules' error model covers either)."""
  chex.assert_trees_all_equal_structs(variant_out, eager_out)
  chex.assert_trees_all_equal_shapes_and_dtypes(variant_out, eager_out)
  if exact:
    chex.assert_trees_all_equal(variant_out, eager_out)
  else:
    leaves = [l for l in jax.tree.leaves(eager_out) if np.issubdtype(l.dtype, np.floating)]
    eps = max(float(np.finfo(l.dtype).eps) for l in leaves)
    chex.assert_trees_all_close(variant_out, eager_out, rtol=8 * eps, atol=8 * eps)


def assert_boxes_enclose(boxes, values):
  """Every value lies in its box, without tolerance (soundness in floating point); ``boxes`` and
  ``values`` are matching pytrees of Intervals and arrays (values may have leading sample axes)."""
  boxes = jax.tree.leaves(boxes, is_leaf=iv.is_interval)
  values = jax.tree.leaves(values)
  assert len(boxes) == len(values)
  for box, value in zip(boxes, values):
    lo, hi, v = np.asarray(box.lo), np.asarray(box.hi), np.asarray(value)
    assert np.all(lo <= v), f"a concrete value is below its bound by {np.max(lo - v)}"
    assert np.all(v <= hi), f"a concrete value is above its bound by {np.max(v - hi)}"


def points_in(rng, box, n=16):
  """``n`` random points of the box (n, ...), its two corners among them, clipped into it (the
  interpolation may round past an end)."""
  lo, hi = np.asarray(box.lo), np.asarray(box.hi)
  u = rng.uniform(size=(n,) + lo.shape)
  u[0], u[1] = 0.0, 1.0
  return np.clip(lo + u * (hi - lo), lo, hi)
