"""Soundness, exactness and tightness of the ARC DP and certify_fn (LSTM, Bi-LSTM and GRU).

The central property: for random small models, vocabularies, sentences and spaces, the concrete
logits of *every* string that ``Space.enumerate`` produces lie inside the certified bounds.
"""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from arc_jax import interval as iv
from arc_jax.certify import certify, certify_model, make_certify_fn
from arc_jax.certify.lstm_dp import _projected_ids, certified_features
from arc_jax.nn import LSTMClassifier
from arc_jax.nn.cells import LSTMCell
from arc_jax.perturbation import PlanBuilder, parse_space
from tests.helpers.jit_variants import assert_boxes_enclose, assert_same_result
from tests.helpers.lstm_models import (S_REVIEW, VOCAB, WORDS, assert_sound, certify_batch,
                                       concrete_logits, make_model, sentence_st, spaces)



@pytest.fixture(autouse=True, scope="module")
def float64():
  """Float64 for this module only (exact comparisons with enumerated strings)."""
  with jax.enable_x64(True):
    yield


@pytest.mark.parametrize("bidirectional,cell", [
    (False, "lstm"), pytest.param(True, "lstm", marks=pytest.mark.slow), (False, "gru"),
    pytest.param(True, "gru", marks=pytest.mark.slow)], ids=["lstm", "bilstm", "gru", "bigru"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), hidden=st.sampled_from([2, 8]),
       weight_scale=st.sampled_from([1.0, 4.0]), space=spaces(),
       sentences=st.lists(sentence_st, min_size=1, max_size=3))
def test_every_enumerated_string_is_inside_the_bounds(bidirectional, cell, seed, hidden,
                                                      weight_scale, space, sentences):
  assume(sum(space.count(s) for s in sentences) <= 1500)
  model = make_model(seed, hidden, weight_scale, bidirectional, cell=cell)
  assert_sound(model, space, sentences)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), bidirectional=st.booleans(),
       cell=st.sampled_from(["lstm", "gru"]), space=spaces(),
       sentences=st.lists(sentence_st, min_size=1, max_size=2))
def test_mean_pooling_is_sound_for_every_space(seed, bidirectional, cell, space, sentences):
  """Per-slot running sums divided by the slot's exact output length (any s→t)."""
  assume(sum(space.count(s) for s in sentences) <= 1500)
  model = make_model(seed, 4, 2.0, bidirectional, pooling="mean", cell=cell)
  assert_sound(model, space, sentences)




@pytest.mark.parametrize("bidirectional", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["lstm", "bilstm"])
@pytest.mark.parametrize("spec,sentence", [
    (S_REVIEW, "one of the best films !"),  # a 4→2 rewrite the original implementation misses
    (S_REVIEW, "this is one of the most good movie ?"),
    ("[(Del,2),(Ins,2)]", "the movie to a good film"),  # duplications next to deletions
    ("[(Del,1),(Ins,1),(Sub,1)]", "a the of good"),
    ("[(Del,2),(Sub,2)]", "x y x y"),  # no match at all
])
def test_named_cases_are_sound(bidirectional, spec, sentence):
  space = parse_space(spec, synonyms={"best": ["good", "most"], "films": ["movies"],
                                      "good": ["best"], "movie": ["film"]})
  model = make_model(3, 5, 3.0, bidirectional)
  members = assert_sound(model, space, [sentence.split()])
  if spec == S_REVIEW and sentence.startswith("one of the best"):
    assert ("the", "best", "films", "!") in set(space.enumerate(sentence.split()))
    assert members > 1


def test_multiclass_margins_are_sound():
  model = make_model(7, 4, 3.0, False, num_classes=5)
  space = parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["best", "x"]})
  assert_sound(model, space, ["the good movie".split(), "a good".split()])


@pytest.mark.parametrize("bidirectional", [False, True], ids=["lstm", "bilstm"])
def test_no_match_collapses_to_concrete_logits(bidirectional):
  """With nothing matching, the bounds contain the concrete logits and are only the rounding
  errors wide (float32: outward rounding bounds every dot product's error, γ_n·|x|·|W|)."""
  rng = np.random.default_rng(0)
  model = LSTMClassifier(rng.normal(size=(len(WORDS), 8)), hidden=6, projection=5,
                         bidirectional=bidirectional, rngs=nnx.Rngs(0))
  space = parse_space("[(Del,2),(Sub,2),(Trans3,1)]", synonyms={"good": ["best"]})
  sentences = ["x y movie".split(), "film it y x y".split()]
  plan = PlanBuilder(space, VOCAB).build(sentences)
  cert = certify_batch(model, space, plan, jnp.zeros((2,), jnp.int32))
  logits = model(jnp.asarray(plan.token_ids), jnp.asarray(plan.lengths))
  assert np.all(cert.logits.lo <= logits) and np.all(logits <= cert.logits.hi)
  np.testing.assert_allclose(cert.logits.lo, logits, atol=1e-4)
  np.testing.assert_allclose(cert.logits.hi, logits, atol=1e-4)
  np.testing.assert_allclose(cert.clean_logits, logits, atol=1e-5)


@pytest.mark.parametrize("pooling", ["final", "mean"])
def test_bottom_slots_never_widen_the_bounds(pooling):
  """Only one stop word under [(Del,2)]: the box is the join of the two concrete states."""
  model = make_model(11, 6, 3.0, bidirectional=True, pooling=pooling)
  space = parse_space("[(Del,2)]")
  sentence = "x good the movie".split()
  plan = PlanBuilder(space, VOCAB).build([sentence])
  box, _ = certified_features(model, space, plan, jnp.asarray(1.0))
  members = [sentence, "x good movie".split()]
  sub = PlanBuilder(parse_space("[]"), VOCAB).build(members)
  states = np.asarray(model.features(jnp.asarray(sub.token_ids), jnp.asarray(sub.lengths)))
  np.testing.assert_allclose(box.lo[0], states.min(axis=0), atol=1e-12)
  np.testing.assert_allclose(box.hi[0], states.max(axis=0), atol=1e-12)


def test_padding_is_a_no_op():
  """A sentence gets the same bounds alone and in a padded batch with longer sentences."""
  model = make_model(5, 4, 2.0, bidirectional=True)
  space = parse_space("[(Del,1),(Ins,1),(Trans3,1)]")
  short = "the best".split()
  alone = PlanBuilder(space, VOCAB).build([short])
  batch = PlanBuilder(space, VOCAB).build([short, "one of the best movie is this".split() * 3])
  labels = jnp.zeros((1,), jnp.int32)
  a = certify_batch(model, space, alone, labels)
  b = certify_batch(model, space, batch, jnp.zeros((2,), jnp.int32))
  np.testing.assert_allclose(a.logits.lo[0], b.logits.lo[0], atol=1e-12)
  np.testing.assert_allclose(a.logits.hi[0], b.logits.hi[0], atol=1e-12)


def test_positions_past_the_longest_sentence_change_nothing():
  """The DP skips the positions past a batch's longest sentence (a conditional inside its scan):
  padded to 8 or to 12, a batch gets the same certificates and ARC-loss gradients, bit for bit.
  (That the skip starts after the last real position is the enumeration tests' to check.)"""
  space = parse_space("[(Sub,1),(Del,1),(Ins,1)]", synonyms={"good": ["best"]})
  space = space.restricted_to(VOCAB)
  sentences = [s.split() for s in ("this movie is good", "the good film !")]
  labels = jnp.asarray([0, 1])
  model = make_model(7, 5, 3.0, bidirectional=False, pooling="mean")
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)

  def margins_and_grad(width):
    plan = PlanBuilder(space, VOCAB, length_buckets=(width,)).build(sentences)
    assert plan.token_ids.shape[1] == width > int(np.max(plan.lengths))

    def loss(p):
      cert = certify_model(nnx.merge(graphdef, p, rest), space, plan, labels)
      return cert.worst_case_logits.sum(), cert.margins
    return jax.jit(jax.value_and_grad(loss, has_aux=True))(params)

  narrow, wide = margins_and_grad(8), margins_and_grad(12)
  for a, b in zip(jax.tree.leaves(narrow), jax.tree.leaves(wide)):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["lstm", "bilstm"])
def test_word_table_gives_the_same_certificates(bidirectional):
  """Projecting each distinct word of a batch once (``Plan.distinct_words``) gives the
  certificates of projecting the words where they stand, bit for bit; a plan refuses a bound
  below its count of distinct ids."""
  space = parse_space("[(Sub,2),(Ins,1),(Trans3,1)]",
                      synonyms={"good": ["best", "most"], "movie": ["film", "films"]})
  space = space.restricted_to(VOCAB)
  sentences = [s.split() for s in ("this movie is good", "a good film and the best movie !",
                                   "the movie 's good one")]
  plan = PlanBuilder(space, VOCAB).build(sentences, batch_size=4)
  ids = np.concatenate([plan.token_ids.ravel()]
                       + [tp.replacement_ids.ravel() for tp in plan.transformations])
  count = len(np.unique(ids))
  assert count <= plan.distinct_words < ids.size
  model = make_model(3, 6, 3.0, bidirectional)
  labels = jnp.asarray([0, 1, 0, 1])
  with_table = certify_batch(model, space, plan, labels)
  in_place = certify_batch(model, space, dataclasses.replace(plan, distinct_words=None), labels)
  for a, b in zip(jax.tree.leaves(with_table), jax.tree.leaves(in_place)):
    np.testing.assert_array_equal(a, b)
  dataclasses.replace(plan, distinct_words=count)
  with pytest.raises(ValueError, match=f"{count} distinct word ids"):
    dataclasses.replace(plan, distinct_words=count - 1)


def test_certify_fn_jits_once_per_bucket_and_vmaps_and_grads():
  rng = np.random.default_rng(0)
  model = LSTMClassifier(rng.normal(size=(len(WORDS), 8)), hidden=6, projection=5,
                         rngs=nnx.Rngs(0))
  space = parse_space("[(Del,2),(Sub,2)]", synonyms={"good": ["best"], "movie": ["film"]})
  builder = PlanBuilder(space, VOCAB)
  graphdef, state = nnx.split(model)
  certify_fn = make_certify_fn(graphdef, space)
  chex.clear_trace_counter()
  once = jax.jit(chex.assert_max_traces(certify_fn, n=1))  # raises if a batch retraces it
  labels = jnp.zeros((4,), jnp.int32)
  batches = [["the good movie".split(), "a movie".split()],
             ["good good".split(), "the good film movie".split(), "x".split()]]
  assert len({builder.build(s, batch_size=4).shape for s in batches}) == 1, "one bucket expected"
  for sentences in batches:
    once(state, builder.build(sentences, batch_size=4), labels, 1.0)
    once(state, builder.build(sentences, batch_size=4), labels, 0.5)

  plan = builder.build(batches[1], batch_size=4)
  eps = jnp.array([0.0, 0.5, 1.0])
  stacked = jax.jit(jax.vmap(certify_fn, in_axes=(None, None, None, 0)))(state, plan, labels, eps)
  jitted = jax.jit(certify_fn)
  for i, e in enumerate(eps):
    single = jitted(state, plan, labels, e)
    np.testing.assert_allclose(stacked.margins[i], single.margins, rtol=1e-5, atol=1e-6)
  widths = [float(jnp.sum(stacked.logits.hi[i] - stacked.logits.lo[i])) for i in range(3)]
  assert widths[0] <= widths[1] <= widths[2]

  param_graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  certify_params_fn = make_certify_fn(param_graphdef, space)

  def loss(params):
    cert = certify_params_fn((params, rest), plan, labels, 1.0)
    return optax.softmax_cross_entropy_with_integer_labels(cert.worst_case_logits, labels).mean()

  grads = jax.jit(jax.grad(loss))(params)
  leaves = jax.tree.leaves(grads)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
  assert any(float(jnp.abs(g).sum()) > 0 for g in leaves)


def test_certify_convenience_matches_certify_fn_and_keeps_order():
  rng = np.random.default_rng(2)
  model = LSTMClassifier(rng.normal(size=(len(WORDS), 8)), hidden=6, projection=5,
                         rngs=nnx.Rngs(1))
  space = parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["best", "unknown-word"]})
  sentences = ["the good movie is good".split(), "x".split(), "a good film".split()]
  out = certify(model, space, sentences, [1, 0, 1], VOCAB, batch_size=2)
  assert out["certified"].shape == (3,)
  for i, s in enumerate(sentences):
    np.testing.assert_allclose(out["clean_logits"][i], concrete_logits(model, [s])[0], atol=1e-5)
  assert np.all(out["logits_lo"] <= out["clean_logits"] + 1e-6)
  assert np.all(out["clean_logits"] <= out["logits_hi"] + 1e-6)


def _four_corner_step(cell, carry, gates_in, recurrent=None, domain=iv.SOUND):
  """The cell step before the lean DP: W_hh h recomputed, gates sliced, four-corner products."""
  del recurrent
  d = domain
  h, c = carry
  pre = d.add(gates_in, cell.h2h(h, d))
  i, f, o, g = (pre[..., k * cell.hidden:(k + 1) * cell.hidden] for k in range(4))
  i, f, o = (d.monotone(jax.nn.sigmoid, v) for v in (i, f, o))
  g = d.monotone(jnp.tanh, g)
  c_new = d.add(d.mul(f, c), d.mul(i, g))
  return d.mul(o, d.monotone(jnp.tanh, c_new)), c_new


@pytest.mark.slow
def test_lean_dp_gives_the_four_corner_dps_certificates_and_gradients(monkeypatch):
  """Shared W_hh products, sign-specialised gate products and split gates compute the same
  margins and the same ARC-loss gradients as the plain cell, up to float64 rounding."""
  space = parse_space("[(Sub,2),(Del,1),(Ins,1)]",
                      synonyms={"good": ["best", "most"], "movie": ["film"]})
  space = space.restricted_to(VOCAB)
  sentences = [s.split() for s in ("this movie is good", "a good film and the best movie !",
                                   "it is")]
  plan = PlanBuilder(space, VOCAB, min_replacement_slots=2).build(sentences, batch_size=4)
  labels = jnp.asarray([0, 1, 0, 1])
  model = make_model(5, 6, 3.0, bidirectional=True)
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)

  def margins_and_grad():
    def loss(p):
      cert = certify_model(nnx.merge(graphdef, p, rest), space, plan, labels)
      return optax.softmax_cross_entropy_with_integer_labels(
          cert.worst_case_logits, labels).mean(), cert.margins
    return jax.jit(jax.value_and_grad(loss, has_aux=True))(params)

  (lean_loss, lean_margins), lean_grads = margins_and_grad()
  monkeypatch.setattr(LSTMCell, "step", _four_corner_step)
  (plain_loss, plain_margins), plain_grads = margins_and_grad()
  np.testing.assert_allclose(lean_margins, plain_margins, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(lean_loss, plain_loss, rtol=1e-12)
  for a, b in zip(jax.tree.leaves(lean_grads), jax.tree.leaves(plain_grads)):
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_word_table_is_skipped_where_the_dp_projects_fewer_ids():
  """A space of deletions and repetitions projects only the tokens (once per direction), fewer
  than the table's rows: the DP projects them in place. Replacements of their own count too."""
  sentences = [s.split() for s in ("this movie is good", "the movie 's good one")]
  for spec, bidirectional in (("[(Del,2),(Ins,2)]", False), ("[(Del,1),(Ins,1)]", True),
                              ("[(Sub,1),(Ins,1)]", False)):
    space = parse_space(spec, synonyms={"good": ["best"]}).restricted_to(VOCAB)
    plan = PlanBuilder(space, VOCAB).build(sentences, batch_size=4)
    model = make_model(3, 6, 1.0, bidirectional)
    tokens = plan.token_ids.size * (2 if bidirectional else 1)
    sub = plan.transformations[0]
    expected = tokens + (sub.replacement_ids.size + plan.token_ids.size if "Sub" in spec else 0)
    assert _projected_ids(model, plan, space.signature) == expected
  assert expected > plan.distinct_words >= tokens  # the Sub space uses the table


class CertifyFnJittedOrNotTest(chex.TestCase):
  """make_certify_fn's certify_fn is pure: jitted and not (chex variants) it gives the same
  certificate, and in both the logit box contains the concrete logits of every member string
  and the margins bound their differences, without tolerance (float64)."""

  @chex.variants(with_jit=True, without_jit=True)
  def test_certify_fn_agrees_jitted_or_not_and_is_sound(self):
    model = make_model(5, 2, 1.0, bidirectional=False)
    space = parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["best"], "movie": ["film"]})
    space = space.restricted_to(VOCAB)
    sentences = ["the good movie".split(), "a film".split()]
    plan = PlanBuilder(space, VOCAB).build(sentences, batch_size=2)
    labels = jnp.asarray([1, 0], jnp.int32)
    graphdef, state = nnx.split(model)
    certify_fn = make_certify_fn(graphdef, space)
    cert = self.variant(certify_fn)(state, plan, labels, 1.0)
    assert_same_result(cert, certify_fn(state, plan, labels, 1.0), exact=False)
    chex.assert_shape([cert.logits.lo, cert.logits.hi, cert.clean_logits, cert.margins], (2, 2))
    chex.assert_type([cert.logits.lo, cert.margins], jnp.float64)
    chex.assert_type(cert.certified, bool)
    for b, sentence in enumerate(sentences):
      logits = concrete_logits(model, list(space.enumerate(sentence)))
      assert_boxes_enclose(cert.logits[b], logits)
      y = int(labels[b])
      assert np.all(np.asarray(cert.margins[b]) <= logits[:, y:y + 1] - logits)
