"""The LSTM and Tree-LSTM cells are pure functions of their parameters and inputs: jitted and not
(chex variants) they give the same states, and in both the interval states enclose the concrete
states of sampled inputs (float32, the models' dtype)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import interval as iv
from arc_jax.nn.cells import LSTMCell
from arc_jax.nn.tree_models import TreeLSTMCell
from tests.helpers.jit_variants import assert_boxes_enclose, assert_same_result, points_in

IN, HIDDEN, ROWS = 4, 3, 2


def random_box(rng, shape):
  a, b = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
  return iv.Interval(jnp.asarray(np.minimum(a, b)), jnp.asarray(np.maximum(a, b)))


class CellsJittedOrNotTest(chex.TestCase):
  """Each cell step, called through ``nnx.merge`` of its split state, under both variants."""

  def check(self, cell, step, boxes):
    """``step(cell, *values)`` on ``boxes`` under the variant equals the eager step to a few ulps
    and encloses the variant's concrete step on points of the boxes."""
    graphdef, state = nnx.split(cell)
    fn = lambda state, *values: step(nnx.merge(graphdef, state), *values)
    out = self.variant(fn)(state, *boxes)
    assert_same_result(out, fn(state, *boxes), exact=False)
    for leaf in jax.tree.leaves(out):
      chex.assert_shape(leaf, (ROWS, HIDDEN))
      chex.assert_type(leaf, jnp.float32)
    rng = np.random.default_rng(1)
    points = jax.tree.map(lambda b: jnp.asarray(points_in(rng, b)), boxes,
                          is_leaf=iv.is_interval)
    concrete = self.variant(fn)(state, *points)
    assert_boxes_enclose(out, concrete)

  @chex.variants(with_jit=True, without_jit=True)
  def test_lstm_step(self):
    rng = np.random.default_rng(0)
    carry = (random_box(rng, (ROWS, HIDDEN)), random_box(rng, (ROWS, HIDDEN)))
    self.check(LSTMCell(IN, HIDDEN, rngs=nnx.Rngs(0)), lambda cell, carry, x: cell(carry, x),
               (carry, random_box(rng, (ROWS, IN))))

  @chex.variants(with_jit=True, without_jit=True)
  def test_tree_leaf_and_internal_steps(self):
    rng = np.random.default_rng(2)
    cell = TreeLSTMCell(IN, HIDDEN, rngs=nnx.Rngs(0))
    self.check(cell, lambda cell, x: cell.leaf(x), (random_box(rng, (ROWS, IN)),))
    left, right = ((random_box(rng, (ROWS, HIDDEN)), random_box(rng, (ROWS, HIDDEN)))
                   for _ in range(2))
    self.check(cell, lambda cell, left, right: cell(left, right), (left, right))
