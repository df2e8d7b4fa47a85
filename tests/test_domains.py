"""The abstract-domain seam (:mod:`arc_jax.domain`), proved with a second, trivial domain.

A "point" domain holds concrete values, not sets. Run through the same cells and DPs as the
interval domain, on spaces that match nowhere (so S(x) = {x}, while the decomposition grid, the
branches and the masked joins of every transformation are all exercised), it must reproduce the
plain forward pass of every model family: equal to float64 rounding (tolerance 1e-12, since the
DP and the forward pass are different XLA programs that may fuse and order sums differently).
The domain touches no library file: the seam is what the DPs and layers use.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import arc_jax
from arc_jax import interval as iv
from arc_jax.certify import certify_jit
from arc_jax.certify.tree_dp import JOINS
from arc_jax.nn import LSTMClassifier, predict
from arc_jax.nn.tree_models import TreeLSTMClassifier, predict_tree
from arc_jax.perturbation import PlanBuilder, parse_space
from arc_jax.data import from_nested
from arc_jax.domain import lstm_update_by_rules
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space

TOL = 1e-12


@pytest.fixture(autouse=True, scope="module")
def float64():
  with jax.enable_x64(True):
    yield


@dataclasses.dataclass(frozen=True)
class PointDomain:
  """Concrete values as their own abstraction, +∞ the empty set ⊥ (the neutral element of the
  join). A join of two different points has no point abstraction: it is NaN, so a DP that joined
  two different states in a one-member space would fail the comparison instead of passing by
  accident."""

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
WORDS = ["<pad>", "a", "the", "good", "movie", "film", "is", "fine", "x"]
VOCAB = {w: i for i, w in enumerate(WORDS)}
NEVER = lambda w: False
# Every shape of rewrite the DPs handle (1→1, 1→0, 1→2, 2→2, 3→1), none of which ever matches.
UNMATCHED = [arc_jax.custom(f"T{s}{t}", s, t, match=NEVER, replace=lambda w, t=t: [("x",) * t])
             for s, t in ((1, 1), (1, 0), (1, 2), (2, 2), (3, 1))]
SEQUENCE_SPACES = {"empty": "[]", "unmatched": "[(T11,2),(T10,1),(T12,1),(T22,1),(T31,1)]"}
SENTENCES = [["a", "good", "movie"], ["the", "film", "is", "fine", "x"], ["x"]]


@pytest.mark.parametrize("space_name", sorted(SEQUENCE_SPACES))
@pytest.mark.parametrize("family", [("final", False), ("mean", False), ("final", True),
                                    ("attention", True)])
def test_point_domain_dp_is_the_forward_pass(family, space_name):
  pooling, bidirectional = family
  rng = np.random.default_rng(0)
  model = LSTMClassifier(rng.normal(size=(len(WORDS), 4)), hidden=3, projection=3, head_hidden=3,
                         num_classes=3, bidirectional=bidirectional, pooling=pooling,
                         dropout_rate=0.0, rngs=nnx.Rngs(0), param_dtype=jnp.float64)
  space = parse_space(SEQUENCE_SPACES[space_name],
                      custom={t.name: t for t in UNMATCHED}).restricted_to(VOCAB)
  plan = PlanBuilder(space, VOCAB).build(SENTENCES, batch_size=4)
  labels = jnp.asarray([0, 1, 2, 0], jnp.int32)
  graphdef, state = nnx.split(model)
  cert = certify_jit(graphdef, space.signature, state, plan, labels, domain=POINT)
  logits = np.asarray(predict(graphdef, state, plan.token_ids, plan.lengths))[:len(SENTENCES)]
  rows = slice(0, len(SENTENCES))
  for got in (cert.logits.lo, cert.logits.hi, cert.clean_logits):
    np.testing.assert_allclose(np.asarray(got)[rows], logits, rtol=TOL, atol=TOL)
  y = np.asarray(labels)[rows]
  margins = logits[np.arange(len(y)), y][:, None] - logits
  np.testing.assert_allclose(np.asarray(cert.margins)[rows], margins, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("join", JOINS)
def test_point_domain_tree_dp_is_the_forward_pass(join):
  rng = np.random.default_rng(1)
  abstract = nnx.eval_shape(lambda: TreeLSTMClassifier(
      np.zeros((len(WORDS), 4)), hidden=3, num_classes=3, dropout_rate=0.0, rngs=nnx.Rngs(0),
      param_dtype=jnp.float64))
  graphdef, state = nnx.split(abstract)
  state = jax.tree.map(lambda v: jnp.asarray(rng.normal(size=v.shape)), state)
  # Sub and Del over a lexicon without synonyms or stop words: nothing matches anywhere.
  space = tree_space(parse_space("[(Sub,2),(Del,1)]", synonyms={}, stopwords=[]))
  trees = [from_nested(("a", ("good", "movie")), 1), from_nested((("the", "film"), ("is", "x")), 2),
           from_nested("x", 0)]
  batch = TreeBatchBuilder(VOCAB, space).build(trees, batch_size=4)
  cert = certify_jit(graphdef, space.signature, state, batch, batch.labels, join=join,
                     domain=POINT)
  logits = np.asarray(predict_tree(graphdef, state, batch))
  for b, tree in enumerate(trees):
    nodes = slice(0, tree.num_nodes)
    for got in (cert.logits.lo, cert.logits.hi, cert.clean_logits):
      np.testing.assert_allclose(np.asarray(got)[b, nodes], logits[b, nodes], rtol=TOL, atol=TOL)
    root = logits[b, tree.num_nodes - 1]
    np.testing.assert_allclose(np.asarray(cert.at_root(cert.margins))[b],
                               root[tree.labels[-1]] - root, rtol=TOL, atol=TOL)
