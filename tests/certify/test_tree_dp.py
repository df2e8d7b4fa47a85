"""Soundness, exactness and tightness of the Tree-LSTM DP and certify_tree_fn.

The central property: for random small trees, models, lexicons, stop words and spaces, the
concrete logits of *every* tree that ``TreeSpace.enumerate`` produces lie inside the certified
bounds, at the root and at every node (whose bounds cover its subtree's space).

Compilation dominates the cost here, so the property test certifies every space with one DP
signature, [(Del,2),(Ins,2),(Sub,2)], and passes the example's budgets (≤ 2 each, 0 = absent) as
the traced ``budgets`` argument; batches use fixed shapes.
"""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from hypothesis import HealthCheck, assume, example, given, settings, strategies as st

import arc_jax
from arc_jax.certify import Certificate, certify_jit, make_certify_fn
from arc_jax import interval as iv
from arc_jax.certify import tree_dp
from arc_jax.certify.tree_dp import JOINS
from arc_jax.data.trees import Tree, from_nested
from arc_jax.nn import tree_models
from arc_jax.nn.tree_models import TreeLSTMClassifier, predict_tree
from arc_jax.perturbation import custom, parse_space
from arc_jax.perturbation.trees import TreeBatchBuilder, TreeSignature, tree_space
from tests.helpers.trees import nested_trees


@pytest.fixture(autouse=True, scope="module")
def float64():
  """Float64 for this module only (exact comparisons with enumerated trees)."""
  with jax.enable_x64(True):
    yield


WORDS = ("a", "the", "to", "good", "movie", "film", "fine", "x")
VOCAB = {w: i for i, w in enumerate(("<pad>",) + WORDS)}
GRID = "[(Del,2),(Ins,2),(Sub,2)]"
TOL = 1e-9
SHAPES = dict(batch_size=2, max_nodes=16, num_steps=8)  # ≤ 6 leaves per tree
MEMBER_ROWS = 64


def make_model(hidden, seed=0, scale=1.0, dropout_rate=0.0):
  """A model with random normal weights (×scale), set from numpy: no initialiser to compile."""
  rng = np.random.default_rng(seed)
  abstract = nnx.eval_shape(lambda: TreeLSTMClassifier(
      np.zeros((len(VOCAB), 4)), hidden=hidden, dropout_rate=dropout_rate, rngs=nnx.Rngs(0),
      param_dtype=jnp.float64))
  graphdef, state = nnx.split(abstract)
  state = jax.tree.map(lambda v: jnp.asarray(rng.normal(size=v.shape) * scale), state)
  return nnx.merge(graphdef, state)


def spaces(budgets, synonyms, stop):
  """(the DP's space over GRID, the example's space) with the same lexicon and stop words."""
  spec = "[" + ",".join(f"({k},{d})" for k, d in zip(("Del", "Ins", "Sub"), budgets)) + "]"
  make = lambda s: tree_space(parse_space(s, synonyms=synonyms, stopwords=stop)
                              .restricted_to(VOCAB))
  return make(GRID), make(spec)


def subtree(tree: Tree, node: int) -> Tree:
  """The subtree rooted at ``node``: a contiguous range of the post-order, ending at ``node``."""
  size = [1] * tree.num_nodes
  for n, (l, r) in enumerate(zip(tree.left, tree.right)):
    if l >= 0:
      size[n] = 1 + size[l] + size[r]
  start = node - size[node] + 1
  span = range(start, node + 1)
  first_leaf = sum(1 for n in range(start) if tree.left[n] < 0)
  leaves = sum(1 for n in span if tree.left[n] < 0)
  shift = lambda c: c - start if c >= 0 else -1
  return Tree(tree.tokens[first_leaf:first_leaf + leaves], tuple(shift(tree.left[n]) for n in span),
              tuple(shift(tree.right[n]) for n in span), tree.labels[start:node + 1])


def root_logits(model, nesteds):
  """Concrete root logits of perturbed trees, in fixed-shape batches (one compilation)."""
  graphdef, state = nnx.split(model)
  builder = TreeBatchBuilder(VOCAB, width=32)
  out = []
  for start in range(0, len(nesteds), MEMBER_ROWS):
    trees = [from_nested(n) for n in nesteds[start:start + MEMBER_ROWS]]
    batch = builder.build(trees, MEMBER_ROWS, max_nodes=16, num_steps=32)
    logits = np.asarray(predict_tree(graphdef, state, batch))
    out.append(logits[np.arange(len(trees)), batch.num_nodes[:len(trees)] - 1])
  return np.concatenate(out)


def certify(model, dp_space, trees, budgets=None, eps=1.0, join="after_cell"):
  batch = TreeBatchBuilder(VOCAB, dp_space, min_substitutes=4, width=8).build(trees, **SHAPES)
  graphdef, state = nnx.split(model)
  return certify_jit(graphdef, dp_space.signature, state, batch, batch.labels, eps, None,
                     budgets=None if budgets is None else jnp.asarray(budgets), join=join)


def assert_sound(model, dp_space, space, trees, budgets, every_node=True, join="after_cell"):
  """Every perturbed (sub)tree's logits and margins are inside the certificate."""
  cert = certify(model, dp_space, trees, budgets, join=join)
  for b, tree in enumerate(trees):
    nodes = range(tree.num_nodes) if every_node else [tree.num_nodes - 1]
    for node in nodes:
      members = list(space.enumerate(subtree(tree, node)))
      logits = root_logits(model, members)
      lo, hi = np.asarray(cert.logits.lo[b, node]), np.asarray(cert.logits.hi[b, node])
      assert np.all(lo - TOL <= logits) and np.all(logits <= hi + TOL), (
          f"unsound at node {node} of {tree} under {space}: escape "
          f"{max(np.max(lo - logits), np.max(logits - hi))}")
      y = tree.labels[node]
      margins = np.asarray(cert.margins[b, node])
      if y >= 0:
        assert np.all(margins <= logits[:, y:y + 1] - logits + TOL), "margin bound is unsound"
      else:
        assert np.all(margins == 0)
      np.testing.assert_allclose(cert.clean_logits[b, node], logits[0], atol=1e-12)
    root, y = tree.num_nodes - 1, tree.labels[-1]
    assert bool(cert.certified[b]) == (y >= 0 and bool(np.all(np.delete(
        np.asarray(cert.margins[b, root]), y) > 0)))


@st.composite
def labelled_trees(draw, min_leaves=1, max_leaves=6):
  tree = from_nested(draw(nested_trees(max_leaves, WORDS, min_leaves)))
  labels = draw(st.lists(st.integers(0, 4), min_size=tree.num_nodes, max_size=tree.num_nodes))
  return Tree(tree.tokens, tree.left, tree.right, tuple(labels))


lexicons = st.dictionaries(st.sampled_from(WORDS),
                           st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
                           min_size=2, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), hidden=st.sampled_from([2, 6]),
       scale=st.sampled_from([0.5, 2.0]),
       trees=st.lists(labelled_trees(min_leaves=3), min_size=1, max_size=2),
       budgets=st.tuples(*[st.integers(0, 2)] * 3).filter(any), synonyms=lexicons,
       stop=st.lists(st.sampled_from(WORDS), max_size=4))
@example(seed=1, hidden=2, scale=2.0, trees=[from_nested((("the", "a"), ("good", ("to", "x"))), 4)],
         budgets=(2, 1, 1), synonyms={"good": ["fine", "film"]}, stop=["a", "the", "to"])
def test_every_perturbed_tree_is_inside_the_bounds(seed, hidden, scale, trees, budgets, synonyms,
                                                   stop):
  dp_space, space = spaces(budgets, synonyms, stop)
  assume(sum(space.count(subtree(t, n)) for t in trees for n in range(t.num_nodes)) <= 1500)
  model = make_model(hidden, seed, scale)
  for join in JOINS:
    assert_sound(model, dp_space, space, trees, budgets, join=join)
  # Joining after the cell is never looser than the original's join before it, at any node.
  after, before = (certify(model, dp_space, trees, budgets, join=join) for join in JOINS)
  assert np.all(after.logits.lo >= before.logits.lo - TOL)
  assert np.all(after.logits.hi <= before.logits.hi + TOL)
  assert np.all(after.margins >= before.margins - TOL)


def test_trees_that_fill_the_leaf_rows_are_sound():
  """A binary tree of N − 1 nodes has N/2 leaves, as many as the DP's leaf rows hold per tree
  (B·⌈N/2⌉ in all): two such trees fill them, and every member is still inside the bounds."""
  words = ("the", "good", "movie", "a", "x", "fine", "to", "film")
  pair = lambda i: (words[i], words[i + 1])
  balanced = from_nested(((pair(0), pair(2)), (pair(4), pair(6))), 1)
  chain = from_nested((((((((words[0], words[1]), words[2]), words[3]), words[4]), words[5]),
                        words[6]), words[7]), 3)
  assert balanced.num_nodes == chain.num_nodes == SHAPES["max_nodes"] - 1
  dp_space, space = spaces((1, 0, 1), {"good": ["fine"], "movie": ["film", "x"]}, ["the", "a"])
  assert_sound(make_model(4, 6, 1.5), dp_space, space, [balanced, chain], (1, 0, 1))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), join=st.sampled_from(JOINS))
def test_merge_step_at_every_capacity_is_the_cell_on_every_valid_split(seed, join):
  """The merge gathers a step's valid splits into a capacity that covers their count: at every
  such capacity its states equal the cell applied split by split (c' + c'' = c, both slots
  valid) and joined per target slot, computed here in a loop; ⊥ where no split is valid."""
  sig = TreeSignature(("Dup", "Sub"), (2, 1))  # no Del: the merge alone
  tables = tree_dp._tables(sig)
  rng = np.random.default_rng(seed)
  width, slots, hidden = 4, len(tables.decomposition), 3
  model = make_model(hidden, seed, 2.0)
  graphdef, cell_state = nnx.split(model.cell)

  def child():
    ends = np.sort(rng.normal(size=(2, 2, width, slots, hidden)) * 2, axis=0)
    ok = rng.random((width, slots)) < 0.6
    ok[0, 0], ok[-1] = True, False  # a real entry, and a padding entry
    return iv.Interval(*ends[:, 0]), iv.Interval(*ends[:, 1]), jnp.asarray(ok)

  left, right = child(), child()
  nodes = jnp.arange(width)
  no_children = (jnp.zeros(width + 1, jnp.int32),) * 2
  combine = jax.jit(tree_dp._merge_rule(graphdef, sig, jnp.zeros(width + 1, jnp.int32),
                                        no_children, join, iv.SOUND), static_argnums=4)
  demand = int(tree_dp._valid_splits(sig, width, left, right, nodes))
  capacities = tree_dp.split_capacities(sig, width)
  assert capacities[-1] == width * len(tables.pair_left)

  cell = model.cell
  expected_h = np.full((2, width, slots, hidden), np.nan)
  expected_c = np.full((2, width, slots, hidden), np.nan)
  expected_valid = np.zeros((width, slots), bool)
  for w in range(width):
    for target in range(slots):
      parts = []
      for a, b in zip(tables.pair_left, tables.pair_right):
        if (tables.decomposition[a] + tables.decomposition[b] == tables.decomposition[target]
            ).all() and left[2][w, a] and right[2][w, b]:
          box = lambda x, s: jax.tree.map(lambda v: v[w, s], x)
          pre = iv.SOUND.add(cell.child_pre_activations(box(left[0], a), 0),
                             cell.child_pre_activations(box(right[0], b), 1))
          c_pair = (box(left[1], a), box(right[1], b))
          if join == "after_cell":
            parts.append(cell.merge(pre, *c_pair))
          else:
            gates = cell.biased(pre)
            parts.append((gates[..., :3 * hidden], cell.forgotten(gates, *c_pair)))
      if parts:
        expected_valid[w, target] = True
        joined = [iv.Interval(np.min([p[i].lo for p in parts], axis=0),
                              np.max([p[i].hi for p in parts], axis=0)) for i in range(2)]
        h, c = joined if join == "after_cell" else cell.finish(*joined)
        expected_h[:, w, target] = h.lo, h.hi
        expected_c[:, w, target] = c.lo, c.hi
  assert demand == np.sum(np.asarray(left[2])[:, tables.pair_left]
                         & np.asarray(right[2])[:, tables.pair_right])
  for capacity in (k for k in capacities if k >= demand):
    h, c, valid = combine(cell_state, left, right, nodes, capacity)
    np.testing.assert_array_equal(valid, expected_valid)
    for got, want in ((h, expected_h), (c, expected_c)):
      np.testing.assert_allclose(np.asarray([got.lo, got.hi])[:, expected_valid],
                                 want[:, expected_valid], rtol=1e-12, atol=1e-12)


def test_join_after_the_cell_is_strictly_tighter_where_splits_meet():
  """Two Sub leaves under one node: slot (Sub,1) joins the splits (1,0) and (0,1), and the cell
  on each split separately gives a narrower box than the cell on their joined pre-activations."""
  budgets = (0, 0, 1)  # the root's box is the point and the join of the two Sub splits
  dp_space, _ = spaces(budgets, {"good": ["fine", "film"], "movie": ["film", "x"]}, [])
  tree = from_nested(("good", "movie"), 3)
  model = make_model(6, seed=3)
  after, before = (certify(model, dp_space, [tree], budgets, join=join) for join in JOINS)
  width = lambda cert: np.asarray(cert.logits.hi - cert.logits.lo)[0, 2]
  assert np.all(width(after) <= width(before) + TOL) and np.sum(width(before) - width(after)) > 1e-3
  with pytest.raises(ValueError, match="Unknown join 'middle'.*'after_cell', 'before_cell'"):
    certify(model, dp_space, [tree], join="middle")


@pytest.mark.parametrize("nested", [
    (("the", "a"), "to"),  # every leaf deletable: the empty tree is not a member
    "the",  # a single leaf
    ((("to", "good"), "the"), (("a", "the"), "movie")),  # deletable subtrees at several depths
])
def test_named_cases_are_sound(nested):
  tree = from_nested(nested, 3)
  dp_space, space = spaces((2, 2, 2), {"good": ["fine", "film"], "movie": ["film"]},
                           ["a", "the", "to"])
  assert_sound(make_model(6, 7, 2.0), dp_space, space, [tree], (2, 2, 2), every_node=False)


TWICE = custom("Twice", 1, 2, match=lambda w: w[0] in ("good", "movie", "x"),
               replace=lambda w: [w * 2], repeats_token=True)


def test_a_custom_duplication_is_certified_as_enumeration_confirms():
  """A user duplication (``custom(..., repeats_token=True)``) is a leaf duplication of tree
  spaces: the tree DP's bounds hold every tree its space enumerates, at every node, and so do
  those of the one-call ``certify`` at the roots. Undeclared, the same rewrite is refused."""
  string_space = parse_space("[(Del,1),(Twice,2),(Sub,1)]", synonyms={"good": ["fine"]},
                             stopwords=["the", "a"], custom={"Twice": TWICE})
  space = tree_space(string_space.restricted_to(VOCAB))
  assert space.kinds == ("Del", "Dup", "Sub")
  trees = [from_nested((("the", "good"), ("movie", "x")), 1), from_nested(("a", "good"), 0)]
  model = make_model(4, 8, 2.0)
  assert_sound(model, space, space, trees, None)
  out = arc_jax.certify.certify(model, string_space, trees, None, VOCAB, batch_size=2)
  for b, tree in enumerate(trees):
    logits = root_logits(model, list(space.enumerate(tree)))
    assert np.all(out.logits_lo[b] - TOL <= logits) and np.all(logits <= out.logits_hi[b] + TOL)
  undeclared = custom("Twice", 1, 2, match=TWICE.match, replace=TWICE.replace)
  with pytest.raises(ValueError, match=r"Twice \(1→2\) has no tree counterpart.*declared with "
                                       r"custom\(\.\.\., repeats_token=True\)"):
    tree_space(parse_space("[(Twice,1)]", custom={"Twice": undeclared}))
  with pytest.raises(ValueError, match="declares repeats_token but rewrites"):
    custom("Swap", 1, 2, match=lambda w: True, replace=lambda w: [("a", "b")],
           repeats_token=True).replacements(("x",))


def test_the_previous_releases_tree_names_warn_and_give_the_same_certificates():
  """certify_tree_jit, make_tree_certify_fn, TreeCertificate and certify_trees (vocabulary
  before labels) still work for one release, each with a DeprecationWarning naming its
  replacement."""
  budgets = jnp.asarray((1, 1, 1))
  dp_space, string = spaces((1, 1, 1), {"good": ["fine"]}, ["the"])
  trees = [from_nested(("the", ("good", "movie")), 1)]
  model = make_model(3, 2)
  graphdef, state = nnx.split(model)
  batch = TreeBatchBuilder(VOCAB, dp_space, min_substitutes=4, width=8).build(trees, **SHAPES)
  new = certify_jit(graphdef, dp_space.signature, state, batch, batch.labels, 1.0, None,
                    budgets=budgets)
  with pytest.warns(DeprecationWarning, match="certify_tree_jit is deprecated.*use "
                                              "arc_jax.certify.certify_jit"):
    old = tree_dp.certify_tree_jit(graphdef, dp_space.signature, state, batch, batch.labels,
                                   1.0, None, budgets)
  with pytest.warns(DeprecationWarning, match="make_tree_certify_fn is deprecated.*use "
                                              r"arc_jax.certify.make_certify_fn\("):
    certify_tree_fn = tree_dp.make_tree_certify_fn(graphdef, dp_space)
  for other in (old, jax.jit(certify_tree_fn)(state, batch, batch.labels, 1.0, None, budgets)):
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(other)):
      np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
  with pytest.warns(DeprecationWarning, match="TreeCertificate is deprecated.*use "
                                              "arc_jax.certify.Certificate"):
    assert tree_dp.TreeCertificate is Certificate
  with pytest.raises(AttributeError, match="has no attribute 'certify_trees_fn'"):
    tree_dp.certify_trees_fn  # pylint: disable=pointless-statement
  current = arc_jax.certify.certify(model, string.space, trees, [1], VOCAB, batch_size=2)
  with pytest.warns(DeprecationWarning, match=r"certify_trees\(model, space, trees, vocab, "
                                              r"labels\) is deprecated.*use "
                                              r"arc_jax.certify.certify\(model"):
    previous = arc_jax.certify.certify_trees(model, string.space, trees, VOCAB, [1], batch_size=2)
  for key in current:
    np.testing.assert_array_equal(previous[key], current[key])


def test_deletions_alone_give_the_exact_hull():
  """Only deletions apply: every slot holds a point, so the root box is the members' hull."""
  tree = from_nested((("the", "good"), "movie"), 0)
  dp_space, space = spaces((2, 0, 0), {}, ["the"])
  model = make_model(6, 3, 2.0)
  cert = certify(model, dp_space, [tree], (2, 0, 0))
  members = list(space.enumerate(tree))
  assert members == [(("the", "good"), "movie"), ("good", "movie")]
  logits = root_logits(model, members)
  np.testing.assert_allclose(cert.root_logits.lo[0], logits.min(axis=0), atol=1e-12)
  np.testing.assert_allclose(cert.root_logits.hi[0], logits.max(axis=0), atol=1e-12)


def test_budgets_beyond_the_signature_give_no_certificate():
  tree = from_nested(("good", "movie"), 0)
  dp_space, _ = spaces((2, 2, 2), {}, [])
  cert = certify(make_model(6), dp_space, [tree], (3, 0, 0))
  assert np.all(np.isinf(cert.root_logits.lo[0])) and not cert.certified[0]


def test_batches_must_be_lowered_for_the_certified_tree_space():
  model = make_model(6)
  graphdef, state = nnx.split(model)
  tree = from_nested(("good", "movie"), 0)
  dp_space, _ = spaces((2, 2, 2), {}, [])
  plain = TreeBatchBuilder(VOCAB, width=8).build([tree], **SHAPES)
  with pytest.raises(ValueError, match="lowered for None"):
    certify_jit(graphdef, dp_space.signature, state, plain, plain.labels)
  batch = TreeBatchBuilder(VOCAB, dp_space, width=8).build([tree], **SHAPES)
  with pytest.raises(TypeError, match="tree_space"):
    certify_jit(graphdef, dp_space.space.signature, state, batch, batch.labels)


def test_no_match_collapses_to_concrete_logits_and_padding_is_a_no_op():
  model = make_model(5, 4, 1.0)
  space = tree_space(parse_space("[(Del,2),(Sub,2)]", synonyms={"good": ["fine"]}))
  plain = from_nested(("x", ("movie", "film")), 1)
  other = from_nested((("the", "good"), "a"), 2)
  alone, padded = certify(model, space, [plain]), certify(model, space, [other, plain])
  concrete = root_logits(model, list(space.enumerate(plain)))
  assert len(concrete) == 1
  np.testing.assert_allclose(alone.root_logits.lo[0], concrete[0], atol=1e-12)
  np.testing.assert_allclose(alone.root_logits.hi[0], concrete[0], atol=1e-12)
  np.testing.assert_allclose(padded.logits.lo[1], alone.logits.lo[0], atol=1e-12)
  np.testing.assert_allclose(padded.logits.hi[1], alone.logits.hi[0], atol=1e-12)
  assert not alone.certified[1]  # the padding row


def test_certify_tree_fn_jits_once_per_bucket_and_grads_with_dropout():
  model = make_model(4, 5, 1.0, dropout_rate=0.5)
  space = tree_space(parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["fine", "film"]}))
  builder = TreeBatchBuilder(VOCAB, space, min_substitutes=4, width=8)
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  certify_fn = make_certify_fn(graphdef, space)
  chex.clear_trace_counter()

  @chex.assert_max_traces(n=1)  # raises if a batch of the same bucket retraces the step
  def loss(params, batch, eps, key):
    cert = certify_fn((params, rest), batch, batch.labels, eps, key)
    labelled = batch.labels >= 0
    ce = optax.softmax_cross_entropy_with_integer_labels(cert.worst_case_logits,
                                                         jnp.maximum(batch.labels, 0))
    return jnp.sum(jnp.where(labelled, ce, 0.0)) / jnp.sum(labelled), cert

  step = jax.jit(jax.value_and_grad(loss, has_aux=True))
  key = jax.random.key(0, impl="rbg")
  batches = [builder.build([from_nested(n, 1) for n in nesteds], **SHAPES)
             for nesteds in (["good", ("the", "good")], [("good", "film"), "x"])]
  widths = []
  for batch, eps in ((batches[0], 0.0), (batches[0], 1.0), (batches[1], 1.0)):
    (value, cert), grads = step(params, batch, eps, key)
    assert np.isfinite(value)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
    assert any(float(jnp.abs(g).sum()) > 0 for g in jax.tree.leaves(grads))
    widths.append(float(jnp.sum(cert.logits.hi - cert.logits.lo)))
  assert widths[0] < widths[1], "eps = 0 should shrink the Sub boxes to the original words"


GRADIENT_SPACE = tree_space(parse_space("[(Del,1),(Ins,1),(Sub,1)]",
                                        synonyms={"good": ["fine", "film"], "movie": ["film"]},
                                        stopwords=["a", "the", "to"]).restricted_to(VOCAB))


def dp_loss(graphdef, params, rest, batch, key):
  cert = make_certify_fn(graphdef, GRADIENT_SPACE)((params, rest), batch, batch.labels, 1.0, key)
  return (jnp.sum(jnp.sin(cert.logits.lo)) + jnp.sum(jnp.cos(cert.logits.hi))
          + jnp.sum(jnp.tanh(cert.margins)) + jnp.sum(jnp.sin(cert.clean_logits)))


def concrete_loss(graphdef, params, rest, batch, key):
  return jnp.sum(jnp.sin(nnx.merge(graphdef, params, rest)(batch, key)))


@functools.lru_cache(maxsize=None)
def gradient_fn(loss, graphdef, autodiff: bool):
  """Jitted ``value_and_grad`` of ``loss`` in params, with ``bottom_up`` differentiated by its
  custom VJP or, with ``autodiff``, by JAX's autodiff of its forward scan (the undecorated
  function, while tracing)."""
  loss = functools.partial(loss, graphdef)
  fn = jax.jit(jax.value_and_grad(loss))
  fill = tree_models._fill
  checked = []

  def traced(*args):
    tree_models._fill = fill.fun if autodiff else fill
    try:
      if not checked:  # the variants differ: only the custom one binds the custom VJP
        assert ("custom_vjp_call" in str(jax.make_jaxpr(loss)(*args))) != autodiff
        checked.append(True)
      return fn(*args)
    finally:
      tree_models._fill = fill

  return traced


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), trees=st.lists(labelled_trees(), min_size=1, max_size=3))
def test_bottom_up_custom_vjp_is_the_autodiff_gradient(seed, trees):
  """The DP's gradient (boxes, ⊥ masks, the cell's params and, through the leaf rows, the leaf and
  projection weights; with dropout) and the concrete model's, by bottom_up's custom VJP, equal
  autodiff's through the same forward scan, for random trees (steps of width 4 run as 1, 2 or 4
  entries or skipped: padded entries, narrow and all-padding steps)."""
  graphdef, params, rest = nnx.split(make_model(3, seed, 1.0, dropout_rate=0.5), nnx.Param, ...)
  shapes = dict(batch_size=3, max_nodes=16, num_steps=16)
  dp = TreeBatchBuilder(VOCAB, GRADIENT_SPACE, min_substitutes=4, width=4).build(trees, **shapes)
  plain = TreeBatchBuilder(VOCAB, width=4).build(trees, **shapes)
  for loss, batch in ((dp_loss, dp), (concrete_loss, plain)):
    (value, grads), (expected_value, expected) = (
        gradient_fn(loss, graphdef, autodiff)(params, rest, batch, jax.random.key(seed))
        for autodiff in (False, True))
    np.testing.assert_allclose(value, expected_value, rtol=1e-12)
    for g, e in zip(jax.tree.leaves(grads), jax.tree.leaves(expected), strict=True):
      np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)
