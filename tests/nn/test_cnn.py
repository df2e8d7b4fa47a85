"""The CNN classifier (arc_jax.nn.cnn): shapes, the forward pass against a numpy reference, and
its interval bounds against exhaustive enumeration, strictly (no tolerance), in float32 with
large weights, for Sub-only spaces (A3T's per-position hulls) and for spaces that delete and
insert words (the shifted-position bound)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import HealthCheck, given, settings, strategies as st

from arc_jax import interval as iv
from arc_jax.nn import predict
from arc_jax.nn.cnn import (CNNClassifier, certified_logits, cnn_feature_bounds, position_shifts,
                            row_shifts)
from arc_jax.perturbation import PlanBuilder, custom, parse_space
from arc_jax.perturbation.spaces import Space

WORDS = ("a", "the", "of", "good", "bad", "movie", "film", "!")
VOCAB = {w: i for i, w in enumerate(("<pad>",) + WORDS)}
STOPWORDS = ("a", "the", "of")


def make_model(seed=0, filters=5, width=3, dim=4, scale=1.0, classes=2, dtype=jnp.float32):
  rng = np.random.default_rng(seed)
  emb = rng.normal(size=(len(VOCAB), dim))
  model = CNNClassifier(emb, filters=filters, kernel_width=width, num_classes=classes,
                        rngs=nnx.Rngs(seed), param_dtype=dtype)
  if scale != 1.0:
    graphdef, state = nnx.split(model)
    state = jax.tree.map(lambda a: a * jnp.asarray(scale, a.dtype), state)
    model = nnx.merge(graphdef, state)
  return model


def reference_logits(model, sentence):
  """Numpy (float64) logits of one sentence: zero vectors past its end, windows
  0 .. max(n − w + 1, 1) − 1, ReLU, max, linear."""
  emb = np.asarray(model.embeddings[...], np.float64)
  kernel = np.asarray(model.conv_kernel[...], np.float64)
  w, f = model.kernel_width, model.filters
  x = np.zeros((max(len(sentence), w), emb.shape[1]))
  for p, word in enumerate(sentence):
    x[p] = emb[VOCAB[word]]
  windows = []
  for j in range(max(len(sentence) - w + 1, 1)):
    pre = np.asarray(model.conv_bias[...], np.float64).copy()
    for k in range(w):
      pre += x[j + k] @ kernel[:, k * f:(k + 1) * f]
    windows.append(np.maximum(pre, 0.0))
  features = np.max(windows, axis=0)
  return (features @ np.asarray(model.head_out.kernel[...], np.float64)
          + np.asarray(model.head_out.bias[...], np.float64))


def concrete_logits(model, strings):
  """The model's own jitted forward pass on every string, at batch shape 64 (not the plan's)."""
  empty = PlanBuilder(parse_space("[]"), VOCAB, length_buckets=(16,))
  graphdef, state = nnx.split(model)
  out = []
  for start in range(0, len(strings), 64):
    chunk = strings[start:start + 64]
    part = empty.build(chunk, batch_size=64)
    out.append(np.asarray(predict(graphdef, state, part.token_ids, part.lengths))[:len(chunk)])
  return np.concatenate(out)


def test_shapes_and_dtypes():
  model = make_model(filters=7, width=4, classes=3)
  token_ids = jnp.asarray([[1, 2, 3, 0, 0], [4, 0, 0, 0, 0]], jnp.int32)
  lengths = jnp.asarray([3, 1], jnp.int32)
  features = model.features(token_ids, lengths)
  logits = model(token_ids, lengths)
  chex.assert_shape(features, (2, 7))
  chex.assert_shape(logits, (2, 3))
  chex.assert_type([features, logits], jnp.float32)
  chex.assert_shape(model.conv_kernel[...], (4, 4 * 7))
  assert np.all(np.asarray(features) >= 0)


@pytest.mark.parametrize("width", [1, 3, 5])
def test_forward_equals_numpy_reference(width):
  model = make_model(seed=width, width=width, scale=3.0)
  sentences = [("the", "good", "film"), (), ("bad",), ("a", "good", "movie", "of", "the", "film",
                                                       "!"), ("good", "bad")]
  logits = concrete_logits(model, sentences)
  for sentence, row in zip(sentences, logits):
    np.testing.assert_allclose(row, reference_logits(model, sentence), rtol=2e-5, atol=2e-5)


def test_padding_and_width_do_not_change_logits():
  model = make_model()
  sentence = [VOCAB[w] for w in ("good", "film", "!")]
  narrow = model(jnp.asarray([sentence], jnp.int32), jnp.asarray([3]))
  wide = model(jnp.asarray([sentence + [5, 6, 7, 0, 0]], jnp.int32), jnp.asarray([3]))
  np.testing.assert_array_equal(narrow, wide)


def test_hotflip_entry_point_matches_features():
  model = make_model()
  ids = jnp.asarray([[1, 4, 6, 0]], jnp.int32)
  lengths = jnp.asarray([3])
  np.testing.assert_array_equal(model.features_from_embeddings(model.embed(ids), lengths),
                                model.features(ids, lengths))
  grads = jax.grad(lambda e: model.head(model.features_from_embeddings(e, lengths)).sum())(
      model.embed(ids))
  assert np.all(np.asarray(grads[0, 3]) == 0)  # padding gets no gradient


def test_position_shifts():
  space = parse_space("[(Del,2),(Sub,2),(Ins,3)]", synonyms={}, stopwords=STOPWORDS)
  assert position_shifts(space.signature) == (2, 3)
  assert position_shifts(parse_space("[(Sub,2)]", synonyms={}).signature) == (0, 0)


def test_words_before_any_rewrite_that_shifts_do_not_move():
  """Only the rewrites of windows before a word move it: per row, L(q) and R(q) count the
  matches before q (up to δ), and a sentence without a deletable word keeps every position."""
  space = parse_space("[(Del,2),(Sub,1)]", synonyms={"good": ["bad"]},
                      stopwords=STOPWORDS).restricted_to(VOCAB)
  plan = PlanBuilder(space, VOCAB).build([("good", "the", "film", "a", "of", "!"),
                                          ("good", "film")], batch_size=2)
  left, right, left_b, right_b = row_shifts(space.signature, plan, 8)
  np.testing.assert_array_equal(left[0], [0, 0, 1, 1, 2, 2, 2, 2])
  np.testing.assert_array_equal(left[1], np.zeros(8))
  np.testing.assert_array_equal(right, np.zeros((2, 8)))
  np.testing.assert_array_equal(left_b, [2, 0])
  np.testing.assert_array_equal(right_b, [0, 0])
  model = make_model()
  box, clean = cnn_feature_bounds(model, space.signature, PlanBuilder(space, VOCAB).build(
      [("film", "!", "movie")]), 1.0, iv.UNROUNDED)
  np.testing.assert_allclose(box.lo[0], clean[0], rtol=1e-6)  # nothing matches: a point
  np.testing.assert_allclose(box.hi[0], clean[0], rtol=1e-6)


def assert_sound(model, space, sentences, labels):
  """Every member's concrete logits and logit differences lie inside the certified bounds,
  strictly; returns the members checked."""
  space = space.restricted_to(VOCAB)
  plan = PlanBuilder(space, VOCAB, min_replacement_slots=4).build(sentences, batch_size=4)
  labels = jnp.asarray(list(labels) + [0] * (4 - len(labels)), jnp.int32)
  logits_box, clean, margins = jax.jit(
      lambda p: certified_logits(model, space.signature, p, labels))(plan)
  members = 0
  for b, sentence in enumerate(sentences):
    strings = list(space.enumerate(sentence))
    members += len(strings)
    logits = concrete_logits(model, strings)
    lo, hi = np.asarray(logits_box.lo[b]), np.asarray(logits_box.hi[b])
    assert np.all(lo <= logits) and np.all(logits <= hi), (
        f"logits escape for {sentence} under {space}: "
        f"{max(np.max(lo - logits), np.max(logits - hi))}")
    y = int(labels[b])
    diffs = logits[:, y:y + 1] - logits
    assert np.all(np.asarray(margins[b]) <= diffs), (
        f"margin escape for {sentence} under {space}: {np.max(np.asarray(margins[b]) - diffs)}")
    own = logits[strings.index(tuple(sentence))]  # x's logits at another batch shape: rounding
    np.testing.assert_allclose(clean[b], own, rtol=1e-5, atol=1e-5 * (1 + np.abs(own).max()))
  return members


sentence_st = st.lists(st.sampled_from(WORDS), min_size=0, max_size=6).map(tuple)
KINDS = ("Sub", "Del", "Ins")


@st.composite
def spaces(draw, kinds=KINDS):
  names = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3, unique=True))
  budgets = [draw(st.integers(1, 2)) for _ in names]
  synonyms = {w: draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
              for w in draw(st.lists(st.sampled_from(WORDS), max_size=6))}
  spec = "[" + ",".join(f"({k},{d})" for k, d in zip(names, budgets)) + "]"
  return parse_space(spec, synonyms=synonyms, stopwords=STOPWORDS)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), width=st.sampled_from([1, 2, 3, 5]),
       scale=st.sampled_from([1.0, 10.0, 100.0]), space=spaces(kinds=("Sub",)),
       sentences=st.lists(sentence_st, min_size=1, max_size=4),
       labels=st.lists(st.integers(0, 1), min_size=4, max_size=4))
def test_sub_only_bounds_hold_for_every_member(seed, width, scale, space, sentences, labels):
  model = make_model(seed=seed, width=width, scale=scale)
  assert_sound(model, space, sentences, labels[:len(sentences)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), width=st.sampled_from([1, 2, 3, 5]),
       scale=st.sampled_from([1.0, 10.0, 100.0]), space=spaces(),
       sentences=st.lists(sentence_st, min_size=1, max_size=4),
       labels=st.lists(st.integers(0, 2), min_size=4, max_size=4))
def test_del_ins_bounds_hold_for_every_member(seed, width, scale, space, sentences, labels):
  model = make_model(seed=seed, width=width, scale=scale, classes=3)
  assert_sound(model, space, sentences, labels[:len(sentences)])


@pytest.mark.parametrize("shape", [(2, 1), (1, 3), (3, 2), (2, 0), (2, 2)])
def test_user_transformations_of_other_shapes_are_sound(shape):
  """Rewrites s → t of any shape (here with fixed outputs) shift positions by t − s each."""
  s, t = shape
  outs = [("good",) * t, ("bad", "!", "film")[:t]]
  user = custom(f"U{s}{t}", s, t, match=lambda w: w[0] in ("the", "good", "a"),
                replace=lambda w: outs)
  base = parse_space("[(Sub,1),(Del,1)]", synonyms={"film": ["movie"], "bad": ["good"]},
                     stopwords=STOPWORDS)
  space = Space(base.transformations + (user,), base.budgets + (2,))
  for seed in range(3):
    model = make_model(seed=seed, width=1 + seed, scale=10.0)
    assert_sound(model, space, [("the", "good", "film", "!"), ("a",), (),
                                ("bad", "the", "movie", "good", "of")], [0, 1, 0, 1])


def test_sub_only_bounds_are_the_per_position_hulls():
  """Sub-only: each position's box is the hull of its word and its replacements (A3T); with no
  replacement at all the box is the clean features' point (unrounded domain)."""
  model = make_model(width=2)
  space = parse_space("[(Sub,1)]", synonyms={"good": ["bad"]}).restricted_to(VOCAB)
  plan = PlanBuilder(space, VOCAB).build([("the", "film", "!"), ("the", "good", "!")])
  box, clean = cnn_feature_bounds(model, space.signature, plan, 1.0, iv.UNROUNDED)
  np.testing.assert_allclose(box.lo[0], clean[0], rtol=1e-6)
  np.testing.assert_allclose(box.hi[0], clean[0], rtol=1e-6)
  # Row 1 has two members; one position varies, so every window's box is the hull of the
  # members' values there: the upper end is attained, the lower end (the best window's least
  # value) lies below both members' features.
  both = model.features(jnp.asarray([[2, 4, 8], [2, 5, 8]]), jnp.asarray([3, 3]))
  np.testing.assert_allclose(box.hi[1], both.max(axis=0), rtol=1e-5, atol=1e-6)
  assert np.all(np.asarray(box.lo[1]) <= np.asarray(both.min(axis=0)) + 1e-6)


def test_certified_logits_are_differentiable():
  model = make_model()
  space = parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["bad"]},
                      stopwords=STOPWORDS).restricted_to(VOCAB)
  plan = PlanBuilder(space, VOCAB).build([("the", "good", "film")], batch_size=2)
  labels = jnp.asarray([1, 0])
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)

  def loss(p):
    _, _, margins = certified_logits(nnx.merge(graphdef, p, rest), space.signature, plan,
                                     labels, 0.5, None, iv.UNROUNDED)
    return -margins.sum()

  grads = jax.grad(loss)(params)
  assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
  assert any(np.any(g != 0) for g in jax.tree.leaves(grads))


def test_refuses_other_domains():
  model = make_model()
  space = parse_space("[(Sub,1)]", synonyms={}).restricted_to(VOCAB)
  plan = PlanBuilder(space, VOCAB).build([("the",)])

  class Other:
    pass

  with pytest.raises(ValueError, match="interval domains only"):
    cnn_feature_bounds(model, space.signature, plan, 1.0, Other())
