"""The Tree-LSTM cell and classifier: concrete forward against an independent recursive numpy
implementation, the interval cell, dropout and the embedding option."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from arc_jax import interval as iv
from arc_jax.data.trees import from_nested
from arc_jax.nn.models import FrozenEmbedding
from arc_jax.nn.tree_models import TreeLSTMClassifier, predict_tree
from arc_jax.perturbation.trees import TreeBatchBuilder


@pytest.fixture(autouse=True, scope="module")
def float64():
  with jax.enable_x64(True):
    yield


WORDS = ("<pad>", "a", "the", "good", "movie", "film", "x")
VOCAB = {w: i for i, w in enumerate(WORDS)}
TREES = [(("the", "good"), ("movie", ("a", "x"))), "film", ("x", "x"),
         ((("a", "good"), "movie"), "the")]


def make_model(seed=0, hidden=4, **kw):
  """A model with random normal weights, set from numpy (no eager JAX initialisers to compile)."""
  rng = np.random.default_rng(seed)
  abstract = nnx.eval_shape(lambda: TreeLSTMClassifier(
      np.zeros((len(WORDS), 5)), hidden=hidden, rngs=nnx.Rngs(0), param_dtype=jnp.float64, **kw))
  graphdef, state = nnx.split(abstract)
  state = jax.tree.map(lambda v: jnp.asarray(rng.normal(size=v.shape)), state)
  return nnx.merge(graphdef, state)


def reference_node_logits(model, tree):
  """Logits of every node (post-order) by plain recursion in numpy, from the model's weights."""
  p = lambda v: np.asarray(v[...])
  emb, w_in, b_in = p(model.embeddings), p(model.projection.linear.kernel), p(
      model.projection.linear.bias)
  w_iou, u_iou, b_iou = p(model.cell.w_iou), p(model.cell.u_iou), p(model.cell.b_iou)
  u_f, b_f = p(model.cell.u_f.kernel), p(model.cell.u_f.bias)
  w_out, b_out = p(model.out.kernel), p(model.out.bias)
  hd = model.hidden
  sigmoid = lambda z: 1 / (1 + np.exp(-z))
  states = []
  leaves = iter(tree.tokens)
  for l, r in zip(tree.left, tree.right):
    if l < 0:
      x = np.maximum(emb[VOCAB[next(leaves)]] @ w_in + b_in, 0)
      iou, c_children = x @ w_iou + b_iou, 0.0
    else:
      (h_l, c_l), (h_r, c_r) = states[l], states[r]
      both = np.concatenate([h_l, h_r])
      iou = both @ u_iou + b_iou
      f = sigmoid(both @ u_f + b_f)
      c_children = f[:hd] * c_l + f[hd:] * c_r
    i, o, u = sigmoid(iou[:hd]), sigmoid(iou[hd:2 * hd]), np.tanh(iou[2 * hd:])
    c = i * u + c_children
    states.append((o * np.tanh(c), c))
  return np.stack([h @ w_out + b_out for h, _ in states])


def test_forward_matches_a_recursive_implementation():
  model = make_model(hidden=5)
  trees = [from_nested(t, 1) for t in TREES]
  batch = TreeBatchBuilder(VOCAB, width=2).build(trees, batch_size=5)
  logits = np.asarray(predict_tree(*nnx.split(model), batch))
  assert logits.shape == (5, 16, 5)
  for b, tree in enumerate(trees):
    np.testing.assert_allclose(logits[b, :tree.num_nodes], reference_node_logits(model, tree),
                               rtol=1e-12, atol=1e-12)


def test_interval_cell_is_exact_on_points_and_sound_on_boxes():
  graphdef, state = nnx.split(make_model(1, hidden=3))
  rng = np.random.default_rng(0)
  lo = rng.normal(size=(4, 1, 3))
  hi = lo + rng.uniform(0, 0.5, size=(4, 1, 3))
  points = [jnp.asarray(rng.uniform(lo[k], hi[k], size=(500, 3))) for k in range(4)]

  @jax.jit
  def run(state, boxes, points):
    cell = nnx.merge(graphdef, state).cell
    internal = lambda v, d=iv.SOUND: cell((v[0], v[1]), (v[2], v[3]), d)
    as_points = [iv.point(p) for p in points]
    return (internal(boxes), internal(points), internal(as_points),
            internal(as_points, iv.UNROUNDED), cell.leaf(boxes[0]), cell.leaf(points[0]),
            cell.leaf(iv.point(points[0])))

  box, concrete, sound_points, unrounded_points, leaf_box, leaf, leaf_points = run(
      state, [iv.Interval(lo[k], hi[k]) for k in range(4)], points)
  for k in range(2):
    # Without rounding, point intervals run the concrete cell (up to the rounding of differently
    # fused programs); with outward rounding they contain it, as boxes contain their points.
    np.testing.assert_allclose(unrounded_points[k].lo, concrete[k], rtol=0, atol=1e-15)
    np.testing.assert_allclose(unrounded_points[k].hi, concrete[k], rtol=0, atol=1e-15)
    for bounds, inside in ((sound_points, concrete), (box, concrete), (leaf_box, leaf),
                           (leaf_points, leaf)):
      assert np.all(bounds[k].lo <= inside[k]) and np.all(inside[k] <= bounds[k].hi)


def test_children_shares_add_up_to_the_box_of_the_concatenation():
  model = make_model(2, hidden=3)
  rng = np.random.default_rng(1)
  h_l, h_r = (iv.Interval(x, x + rng.uniform(0, 1, 3)) for x in rng.normal(size=(2, 3)))
  shares = iv.add(model.cell.child_pre_activations(h_l, 0),
                  model.cell.child_pre_activations(h_r, 1))
  kernel = jnp.concatenate([model.cell.u_iou[...], model.cell.u_f.kernel[...]], axis=1)
  both = iv.Interval(jnp.concatenate([h_l.lo, h_r.lo]), jnp.concatenate([h_l.hi, h_r.hi]))
  whole = iv.linear(both, kernel)
  np.testing.assert_allclose(shares.lo, whole.lo, atol=1e-12)
  np.testing.assert_allclose(shares.hi, whole.hi, atol=1e-12)


def test_embeddings_are_frozen_by_default_and_trainable_on_request():
  build = lambda **kw: nnx.eval_shape(lambda: TreeLSTMClassifier(
      np.zeros((len(WORDS), 5)), hidden=4, rngs=nnx.Rngs(0), **kw))
  frozen, trainable = build(), build(trainable_embeddings=True)
  assert isinstance(frozen.embeddings, FrozenEmbedding)
  assert "embeddings" not in nnx.state(frozen, nnx.Param)
  assert "embeddings" in nnx.state(trainable, nnx.Param)
  sizes = {k: v.shape for k, v in nnx.to_flat_state(nnx.state(frozen, nnx.Param))}
  assert sizes == {("projection", "linear", "kernel"): (5, 4), ("projection", "linear", "bias"): (4,),
                   ("cell", "w_iou"): (4, 12), ("cell", "u_iou"): (8, 12), ("cell", "b_iou"): (12,),
                   ("cell", "u_f", "kernel"): (8, 8), ("cell", "u_f", "bias"): (8,),
                   ("out", "kernel"): (4, 5), ("out", "bias"): (5,)}


def test_dropout_is_keyed_and_off_in_evaluation():
  model = make_model(3, dropout_rate=0.5)
  batch = TreeBatchBuilder(VOCAB, width=2).build([from_nested(t) for t in TREES], batch_size=5)
  graphdef, state = nnx.split(model)
  train = jax.jit(lambda state, batch, key: nnx.merge(graphdef, state)(batch, key))
  clean = predict_tree(graphdef, state, batch)
  key = jax.random.key(0, impl="rbg")  # quicker to compile than threefry
  a, b = train(state, batch, key), train(state, batch, key)
  np.testing.assert_array_equal(a, b)
  assert not np.allclose(a, clean)
  assert not np.allclose(a, train(state, batch, jax.random.key(1, impl="rbg")))
