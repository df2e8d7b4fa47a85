"""Tree HotFlip: every candidate is a member of S(t) (against TreeSpace.enumerate), an unbounded
beam finds all of S(t), the first-order scores equal directional derivatives of an independent
numpy Tree-LSTM, and CF ⇒ EX ⇒ HF ⇒ Acc per tree."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

from arc_jax.attacks import (exhaustive_tree_robustness, tree_adversarial_examples,
                             tree_hotflip_robustness, tree_hotflip_search)
from arc_jax.certify import certify_jit
from arc_jax.data.trees import from_nested, to_nested
from arc_jax.nn.tree_models import TreeLSTMClassifier, predict_tree
from arc_jax.perturbation import parse_space
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space
from tests.helpers.trees import WORDS, nested_trees

VOCAB = {w: i for i, w in enumerate(("<pad>",) + WORDS)}
NODES = 16  # 6 leaves (11 nodes) plus 2 per Dup budget ≤ 2
SLOTS = 4  # Sub slots: lexicons of up to 3 candidates, one batch shape


@pytest.fixture(autouse=True, scope="module")
def float64():
  with jax.enable_x64(True):
    yield


@pytest.fixture(scope="module")
def model():
  """Random normal weights (numpy; no eager initialisers to compile), hidden 3, 5 classes."""
  rng = np.random.default_rng(0)
  abstract = nnx.eval_shape(lambda: TreeLSTMClassifier(
      np.zeros((len(VOCAB), 4)), hidden=3, dropout_rate=0.0, rngs=nnx.Rngs(0),
      param_dtype=jnp.float64))
  graphdef, state = nnx.split(abstract)
  return graphdef, jax.tree.map(lambda v: jnp.asarray(rng.normal(size=v.shape)), state)


def scaled(state, scale):
  return jax.tree.map(lambda v: v * scale, state)


def space_of(spec, synonyms, stop):
  return tree_space(parse_space(spec, synonyms=synonyms, stopwords=stop).restricted_to(VOCAB))


def builder_of(space):
  return TreeBatchBuilder(VOCAB, space, node_buckets=(NODES,), min_substitutes=SLOTS)


@st.composite
def tree_spaces(draw, max_kinds=3):
  kinds = draw(st.lists(st.sampled_from(["Del", "Ins", "Sub"]), min_size=1, max_size=max_kinds,
                        unique=True))
  spec = "[" + ",".join(f"({k},{draw(st.integers(0, 2))})" for k in kinds) + "]"
  synonyms = draw(st.dictionaries(st.sampled_from(WORDS), st.lists(st.sampled_from(WORDS),
                                                                   max_size=3), max_size=6))
  return spec, synonyms, draw(st.lists(st.sampled_from(WORDS), max_size=4))


@settings(max_examples=25, deadline=None)
@given(st.lists(nested_trees(), min_size=1, max_size=3), tree_spaces(),
       st.sampled_from([1.0, 8.0]), st.integers(0, 4))
def test_every_candidate_is_a_distinct_member_of_the_tree_space(model, nested, spec, scale,
                                                                label):
  space = space_of(*spec)
  trees = [from_nested(n, label) for n in nested]
  graphdef, state = model
  found = tree_hotflip_search(graphdef, scaled(state, scale), space, trees, builder_of(space),
                              beam=3, batch_size=2)
  for tree, candidates in zip(trees, found):
    members = set(space.enumerate(tree))
    keys = [to_nested(c.tree) for c in candidates]
    assert 1 <= len(candidates) <= 3 and len(set(keys)) == len(keys)
    assert set(keys) <= members
    assert all(c.tree.label == tree.label for c in candidates)  # the root keeps t's label
    scores = [c.score for c in candidates]
    assert scores == sorted(scores, reverse=True)
    for c in candidates:
      leaves = [p.start for p in c.picks]
      assert len(set(leaves)) == len(leaves)
      used = np.bincount([p.transformation for p in c.picks], minlength=len(space.budgets))
      assert all(used <= space.budgets)


@settings(max_examples=15, deadline=None)
@given(nested_trees(max_leaves=5), tree_spaces(max_kinds=1), st.sampled_from([1.0, 8.0]))
def test_an_unbounded_beam_finds_the_whole_space(model, nested, spec, scale):
  """With one transformation, routes to the same tree use the same picks' count, so a beam that
  holds everything visits every application choice: the candidates are S(t) exactly."""
  space = space_of(*spec)
  tree = from_nested(nested, 2)
  graphdef, state = model
  members = set(space.enumerate(tree))
  assert len(members) < 128  # 5 leaves, δ ≤ 2, 3 synonyms: at most 1 + 15 + 90
  found = tree_hotflip_search(graphdef, scaled(state, scale), space, [tree], builder_of(space),
                              beam=128, batch_size=1)[0]  # one beam (one shape) for every tree
  assert {to_nested(c.tree) for c in found} == members


def reference(model, tree, offsets):
  """(root cross-entropy, (h, c) of every node) of an independent recursive numpy Tree-LSTM,
  ``offsets[node] = (dh, dc)`` added to the node's state as it is computed."""
  graphdef, state = model
  m = nnx.merge(graphdef, state)
  p = lambda v: np.asarray(v[...])
  emb, w_in, b_in = p(m.embeddings), p(m.projection.linear.kernel), p(m.projection.linear.bias)
  w_iou, u_iou, b_iou = p(m.cell.w_iou), p(m.cell.u_iou), p(m.cell.b_iou)
  u_f, b_f, w_out, b_out = p(m.cell.u_f.kernel), p(m.cell.u_f.bias), p(m.out.kernel), p(m.out.bias)
  hd = m.hidden
  sigmoid = lambda z: 1 / (1 + np.exp(-z))
  states, leaves = [], iter(tree.tokens)
  for node, (l, r) in enumerate(zip(tree.left, tree.right)):
    if l < 0:
      iou, c_children = np.maximum(emb[VOCAB[next(leaves)]] @ w_in + b_in, 0) @ w_iou + b_iou, 0.0
    else:
      both = np.concatenate([states[l][0], states[r][0]])
      iou, f = both @ u_iou + b_iou, sigmoid(both @ u_f + b_f)
      c_children = f[:hd] * states[l][1] + f[hd:] * states[r][1]
    c = sigmoid(iou[:hd]) * np.tanh(iou[2 * hd:]) + c_children
    dh, dc = offsets.get(node, (0.0, 0.0))
    states.append((sigmoid(iou[hd:2 * hd]) * np.tanh(c) + dh, c + dc))
  logits = states[-1][0] @ w_out + b_out
  loss = np.log(np.sum(np.exp(logits - logits.max()))) + logits.max() - logits[tree.label]
  return loss, states


@pytest.mark.parametrize("spec", ["[(Sub,1)]", "[(Ins,1)]", "[(Del,1)]"])
def test_scores_are_directional_derivatives_at_the_rewritten_node(model, spec):
  """Each one-pick candidate's score is g · Δ at the node it changes (module docstring), checked
  by central differences of an independent numpy Tree-LSTM (float64)."""
  synonyms = {"good": ["fine", "x"], "movie": ["film"], "a": ["the"]}
  space = space_of(spec, synonyms, ("a", "the", "to"))
  tree = from_nested((("a", "good"), ("movie", ("the", "x"))), 3)
  graphdef, state = model
  m = nnx.merge(graphdef, state)
  found = tree_hotflip_search(graphdef, state, space, [tree], builder_of(space), beam=50,
                              batch_size=1)[0]
  states = reference(model, tree, {})[1]
  leaf_nodes = [n for n, leaf in enumerate(tree.leaf_index) if leaf >= 0]
  parent = {c: n for n, (l, r) in enumerate(zip(tree.left, tree.right)) if l >= 0 for c in (l, r)}
  checked = 0
  for candidate in found:
    if not candidate.picks:
      assert candidate.score == 0.0
      continue
    (pick,) = candidate.picks
    node = leaf_nodes[pick.start]
    if spec == "[(Sub,1)]":
      word = jnp.asarray([VOCAB[pick.replacement[0]]])
      new = m.cell.leaf(jax.nn.relu(m.input_pre_activation(word[None], None)))
      new = tuple(np.asarray(a[0, 0]) for a in new)
    elif spec == "[(Ins,1)]":
      s = tuple(jnp.asarray(a)[None] for a in states[node])
      new = tuple(np.asarray(a[0]) for a in m.cell(s, s))
    else:
      p = parent[node]
      sibling = tree.right[p] if tree.left[p] == node else tree.left[p]
      node, new = p, states[sibling]
    direction = tuple(a - b for a, b in zip(new, states[node]))
    eps = 1e-6
    plus = reference(model, tree, {node: tuple(eps * d for d in direction)})[0]
    minus = reference(model, tree, {node: tuple(-eps * d for d in direction)})[0]
    np.testing.assert_allclose(candidate.score, (plus - minus) / (2 * eps), rtol=1e-5,
                               atol=1e-8)
    checked += 1
  assert checked == {"[(Sub,1)]": 4, "[(Ins,1)]": 5, "[(Del,1)]": 2}[spec]


def test_certified_exhaustive_hotflip_and_clean_accuracy_are_ordered(model):
  """CF ⇒ EX ⇒ HF ⇒ Acc per tree, on a model small weights certify and large ones break."""
  space = space_of("[(Del,1),(Ins,1),(Sub,2)]", {"good": ["fine", "x"], "movie": ["film"]},
                   ("a", "the"))
  builder = builder_of(space)
  rng = np.random.default_rng(1)
  trees = [from_nested(n, int(rng.integers(5))) for n in (
      (("a", "good"), ("movie", ("the", "x"))), ("good", "movie"), "film",
      ((("a", "good"), "movie"), "the"), ("x", ("good", "a")))] * 2
  graphdef, base = model
  batch = builder.build(trees)
  certified_total = broken_total = 0
  for scale in (0.05, 1.0, 4.0):
    state = scaled(base, scale)

    def root_logits(trees, state=state):
      logits = np.asarray(predict_tree(graphdef, state, trees))
      return logits[np.arange(len(logits)), np.maximum(trees.num_nodes - 1, 0)]

    certified = np.asarray(certify_jit(graphdef, space.signature, state, batch,
                                       batch.labels).certified)
    ex = exhaustive_tree_robustness(root_logits, space, trees, builder, certified=certified,
                                    shortcut=False, batch_size=10)
    hf = tree_hotflip_robustness(graphdef, state, space, trees, builder, root_logits, beam=5,
                                 batch_size=2)
    assert not ex.audit_failures
    assert np.all(~certified | ex.robust) and np.all(~ex.robust | hf.robust)
    assert np.all(~hf.robust | hf.correct) and np.array_equal(hf.correct, ex.correct)
    certified_total += certified.sum()
    broken_total += np.sum(hf.correct & ~hf.robust)
    for tree, candidates, counterexample in zip(trees, hf.candidates, hf.counterexamples):
      assert set(candidates) <= set(space.enumerate(tree))
      assert counterexample is None or counterexample in candidates
  assert certified_total > 0 and broken_total > 0  # the order is checked on both kinds


def test_adversarial_examples_carry_node_labels(model):
  space = space_of("[(Ins,1),(Sub,1)]", {"good": ["fine"]}, ())
  tree = from_nested(("good", "movie"), 4)
  tree = type(tree)(tree.tokens, tree.left, tree.right, (1, 2, 4))
  graphdef, state = model
  (member,) = tree_adversarial_examples(graphdef, state, space, [tree], builder_of(space),
                                        batch_size=1)
  assert to_nested(member) in set(space.enumerate(tree))
  assert member.label == 4 and set(member.labels) <= {1, 2, 4}


def test_invalid_settings_name_the_problem(model):
  space = space_of("[(Sub,1)]", {"good": ["fine"]}, ())
  graphdef, state = model
  tree = [from_nested("good", 1)]
  with pytest.raises(ValueError, match="beam must be >= 1"):
    tree_hotflip_search(graphdef, state, space, tree, builder_of(space), beam=0)
  with pytest.raises(ValueError, match="builder lowers trees for another space"):
    tree_hotflip_search(graphdef, state, space, tree, TreeBatchBuilder(VOCAB))
