"""Attention pooling (paper appendix "Handling Attention"): the interval rule for the softmax-
weighted sum, the positional DP against enumeration (every transformation shape, LSTM and
Bi-LSTM), concrete = point, and a short ARC training run from the CLI."""

import functools
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from tests.helpers.experiment_scripts import load_script
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from tests.helpers.lstm_models import (KINDS, S_REVIEW, SWAP, TOL, VOCAB, assert_sound, make_model,
                                       sentence_st, spaces)

from arc_jax import interval as iv
from arc_jax.certify import make_certify_fn
from arc_jax.certify.attention_dp import attention_features, slot_states
from arc_jax.nn import LSTMClassifier
from arc_jax.perturbation import PlanBuilder, parse_space
from arc_jax.train import ConfigError, default_config, validate

from tests.helpers.fake_data_root import write_data_root


@pytest.fixture(autouse=True, scope="module")
def float64():
  with jax.enable_x64(True):
    yield


# -- the interval rule -------------------------------------------------------------------------

def vertex_extremes(lo, hi, v_lo, v_hi, mask):
  """Exact max / min of Σ softmax(e) v over the boxes: a linear-fractional function of the
  weights exp(e), so its extremes are at vertices of the score box (enumerated here)."""
  idx = np.nonzero(mask)[0]
  top, bottom = np.full(v_lo.shape[1], -np.inf), np.full(v_lo.shape[1], np.inf)
  for corner in itertools.product([False, True], repeat=len(idx)):
    e = np.where(corner, hi[idx], lo[idx])
    alpha = np.exp(e - e.max())
    alpha /= alpha.sum()
    top, bottom = np.maximum(top, alpha @ v_hi[idx]), np.minimum(bottom, alpha @ v_lo[idx])
  return bottom, top


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), positions=st.integers(1, 6), scale=st.sampled_from([1, 10]))
def test_softmax_weighted_sum_is_the_exact_extreme_over_the_boxes(seed, positions, scale):
  rng = np.random.default_rng(seed)
  lo = rng.normal(size=positions) * scale
  hi = lo + rng.uniform(0, 3, size=positions) * scale * (rng.random(positions) < 0.8)
  v_lo = rng.normal(size=(positions, 3))
  v_hi = v_lo + rng.uniform(0, 1, size=(positions, 3)) * (rng.random((positions, 3)) < 0.8)
  mask = rng.random(positions) < 0.8
  mask[rng.integers(positions)] = True
  out = iv.softmax_weighted_sum(iv.Interval(jnp.asarray(lo), jnp.asarray(hi)),
                                iv.Interval(jnp.asarray(v_lo), jnp.asarray(v_hi)),
                                jnp.asarray(mask))
  bottom, top = vertex_extremes(lo, hi, v_lo, v_hi, mask)
  np.testing.assert_allclose(out.lo, bottom, atol=1e-12)  # sound and exact
  np.testing.assert_allclose(out.hi, top, atol=1e-12)
  for _ in range(20):  # random interior members
    e = rng.uniform(lo, hi)[mask]
    alpha = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
    y = alpha @ rng.uniform(v_lo, v_hi)[mask]
    assert np.all(out.lo - TOL <= y) and np.all(y <= out.hi + TOL)


def test_softmax_weighted_sum_float32_wide_scores_fall_back_soundly():
  """Score boxes wider than float32's exp range: the bound falls back to the values' hull."""
  rng = np.random.default_rng(0)
  lo = np.array([-150.0, 0.0, 3.0, 90.0])
  hi = np.array([150.0, 0.5, 3.0, 95.0])
  v_lo = rng.normal(size=(4, 5))
  v_hi = v_lo + 0.5
  mask = np.array([True, True, True, True])
  args = [jnp.asarray(a, jnp.float32) for a in (lo, hi, v_lo, v_hi)]
  out = iv.softmax_weighted_sum(iv.Interval(*args[:2]), iv.Interval(*args[2:]), jnp.asarray(mask))
  assert out.lo.dtype == jnp.float32 and np.all(np.isfinite(out.lo)) and np.all(
      np.isfinite(out.hi))
  bottom, top = vertex_extremes(lo, hi, v_lo, v_hi, mask)
  assert np.all(out.lo <= bottom + 1e-6) and np.all(top - 1e-6 <= out.hi)


def test_softmax_weighted_sum_point_is_concrete_and_empty_is_zero():
  rng = np.random.default_rng(1)
  scores, values = rng.normal(size=(2, 5)), rng.normal(size=(2, 5, 3))
  mask = np.array([[True] * 5, [True, True, False, False, False]])
  concrete = iv.softmax_weighted_sum(jnp.asarray(scores), jnp.asarray(values), jnp.asarray(mask))
  alpha = np.exp(scores[1, :2]) / np.exp(scores[1, :2]).sum()
  np.testing.assert_allclose(concrete[1], alpha @ values[1, :2], atol=1e-12)
  box = iv.softmax_weighted_sum(iv.point(jnp.asarray(scores)), iv.point(jnp.asarray(values)),
                                jnp.asarray(mask))
  # Outward rounding: the point box contains the concrete result and is a few rounding errors wide.
  assert np.all(box.lo <= concrete) and np.all(concrete <= box.hi)
  np.testing.assert_allclose(box.lo, concrete, atol=1e-12)
  np.testing.assert_allclose(box.hi, concrete, atol=1e-12)
  empty = iv.softmax_weighted_sum(iv.point(jnp.asarray(scores)), iv.point(jnp.asarray(values)),
                                  jnp.zeros((2, 5), bool))
  assert np.all(empty.lo <= 0) and np.all(empty.hi >= 0)
  assert np.all(empty.hi - empty.lo < 1e-300)


# -- the positional DP -------------------------------------------------------------------------

def choices(space, tokens):
  """Every (string, decomposition slot) of S(x): an enumeration independent of the DP."""
  tokens = tuple(tokens)
  windows = space.windows(tokens)

  def walk(i, used, prefix):
    if i == len(tokens):
      yield prefix, used
      return
    yield from walk(i + 1, used, prefix + tokens[i:i + 1])
    for k, t in enumerate(space.transformations):
      if used[k] < space.budgets[k] and windows[i][k]:
        for r in windows[i][k]:
          yield from walk(i + t.s, used[:k] + (used[k] + 1,) + used[k + 1:], prefix + r)

  return set(walk(0, (0,) * len(space.budgets), ()))


@functools.partial(jax.jit, static_argnums=(0, 2))
def slot_states_jit(graphdef, state, signature, plan):
  return slot_states(nnx.merge(graphdef, state), signature, plan, jnp.asarray(1.0))


def position_states(model, strings):
  plan = PlanBuilder(parse_space("[]"), VOCAB).build(strings, batch_size=max(1, len(strings)))
  return np.asarray(model.position_states(jnp.asarray(plan.token_ids), jnp.asarray(plan.lengths)))


def assert_states_in_slot_boxes(model, space, sentence):
  """Every string's state at every position lies in its slot's box at that position, and the
  slot's mask is exactly the string's positions."""
  space = space.restricted_to(VOCAB)
  plan = PlanBuilder(space, VOCAB, min_replacement_slots=4).build([sentence], batch_size=1)
  box, mask, reachable = slot_states_jit(*nnx.split(model), space.signature, plan)
  slots = {tuple(c): i for i, c in enumerate(space.decomposition())}
  members = sorted(choices(space, sentence))
  states = position_states(model, [z for z, _ in members])
  assert {slots[c] for _, c in members} == set(np.nonzero(np.asarray(reachable[0]))[0])
  for (z, c), h in zip(members, states):
    s = slots[c]
    np.testing.assert_array_equal(mask[0, s], np.arange(mask.shape[-1]) < len(z))
    lo, hi = np.asarray(box.lo[0, s, :len(z)]), np.asarray(box.hi[0, s, :len(z)])
    assert np.all(lo - TOL <= h[:len(z)]) and np.all(h[:len(z)] <= hi + TOL), (
        f"state of {z} (slot {c}) escapes its box under {space}")
  return box, mask, members


def random_model_cases(max_examples):
  """Hypothesis over random models, spaces and sentences: every string's state in its slot's
  box, and every string's logits inside the certified bounds."""
  @pytest.mark.parametrize("bidirectional,cell", [
      (False, "lstm"), pytest.param(True, "lstm", marks=pytest.mark.slow), (True, "gru")],
      ids=["lstm", "bilstm", "bigru"])
  @settings(max_examples=max_examples, deadline=None,
            suppress_health_check=[HealthCheck.too_slow])
  @given(seed=st.integers(0, 10_000), hidden=st.sampled_from([2, 6]),
         weight_scale=st.sampled_from([1.0, 4.0]), space=spaces(),
         sentences=st.lists(sentence_st, min_size=1, max_size=3))
  def test(bidirectional, cell, seed, hidden, weight_scale, space, sentences):
    assume(sum(space.count(s) for s in sentences) <= 1500)
    model = make_model(seed, hidden, weight_scale, bidirectional, "attention", cell=cell)
    assert_states_in_slot_boxes(model, space, sentences[0])
    assert_sound(model, space, sentences)

  return test


test_random_models_spaces_and_sentences = random_model_cases(6)
test_random_models_spaces_and_sentences_extended = pytest.mark.slow(random_model_cases(40))

SHAPES = {"1→0, 4→2, 2→2": "[(Del,1),(Trans3,1),(Swap,1)]",
          "1→2 (repeat and not), 1→1, 2→2": "[(Ins,1),(Trans4,1),(Sub,1),(Trans2,1)]"}
SHAPE_SENTENCE = "one of the most good ! this is the movie to a".split()


def assert_shape_sound(spec, bidirectional):
  space = parse_space(spec, synonyms={"good": ["best", "x"], "movie": ["film"]},
                      custom={"Swap": SWAP})
  model = make_model(5, 4, 3.0, bidirectional, "attention")
  _, _, members = assert_states_in_slot_boxes(model, space, SHAPE_SENTENCE)
  used = {k for _, c in members for k, n in enumerate(c) if n}
  assert used == set(range(len(space.budgets))), "every transformation must apply somewhere"
  assert_sound(model, space, [SHAPE_SENTENCE, "the good".split()])


# The Bi-LSTM runs the LSTM's forward DP and its boxes hold the forward states, so CI runs the
# Bi-LSTM variant of these two fixed-case tests and the LSTM one is slow; the LSTM's own
# reachable-grid path (a cut signature) is fuzzed by test_random_models_spaces_and_sentences.
FORWARD_IN_BILSTM = pytest.mark.parametrize(
    "bidirectional", [pytest.param(False, marks=pytest.mark.slow), True], ids=["lstm", "bilstm"])


@FORWARD_IN_BILSTM
@pytest.mark.parametrize("spec", SHAPES.values(), ids=SHAPES.keys())
def test_every_transformation_shape_is_sound(bidirectional, spec):
  """Every s→t of the library and a custom swap, grouped into two spaces."""
  assert_shape_sound(spec, bidirectional)


@pytest.mark.slow
@pytest.mark.parametrize("bidirectional", [False, True], ids=["lstm", "bilstm"])
@pytest.mark.parametrize("kind", KINDS)
def test_each_transformation_alone_with_budget_two(bidirectional, kind):
  assert_shape_sound(f"[({kind},2)]", bidirectional)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["lstm", "bilstm"])
def test_swap_example_needs_the_state_in_the_middle_of_the_rewrite(bidirectional):
  """The appendix's example: x = "to the", S = {(swap, 1)}. Slot 1 holds only "the to", whose
  first state is LSTM("the"), computed in the middle of the swap; each slot holding one string,
  every box is that string's state exactly (the suffix condition keeps "to" out of slot 1)."""
  model = make_model(9, 4, 3.0, bidirectional, "attention")
  box, mask, members = assert_states_in_slot_boxes(model, parse_space(
      "[(Swap,1)]", custom={"Swap": SWAP}), ["to", "the"])
  assert sorted(members) == [(("the", "to"), (1,)), (("to", "the"), (0,))]
  states = position_states(model, [("to", "the"), ("the", "to")])
  for slot in (0, 1):
    np.testing.assert_allclose(box.lo[0, slot, :2], states[slot, :2], atol=1e-12)
    np.testing.assert_allclose(box.hi[0, slot, :2], states[slot, :2], atol=1e-12)


def test_deletion_slots_keep_their_own_positions():
  """[(Del,1)] on "x the y": slot 1 is "x y" alone, so its boxes are exact; a box joining
  "x the" into position 1 of slot 1 would be sound but loose."""
  model = make_model(4, 4, 3.0, False, "attention")
  box, mask, _ = assert_states_in_slot_boxes(model, parse_space("[(Del,1)]"), ["x", "the", "y"])
  states = position_states(model, [("x", "y")])[0, :2]
  np.testing.assert_allclose(box.lo[0, 1, :2], states, atol=1e-12)
  np.testing.assert_allclose(box.hi[0, 1, :2], states, atol=1e-12)
  assert not mask[0, 1, 2]


@FORWARD_IN_BILSTM
def test_s_review_and_empty_strings_are_sound(bidirectional):
  model = make_model(3, 5, 3.0, bidirectional, "attention")
  syn = {"best": ["good", "most"], "films": ["movies"]}
  assert_sound(model, parse_space(S_REVIEW, synonyms=syn), ["one of the best films !".split()])
  assert_sound(model, parse_space("[(Del,2)]"), [["the", "a"], ["the"]])  # "" is a member


@pytest.mark.parametrize("bidirectional", [False, True], ids=["lstm", "bilstm"])
def test_no_match_gives_the_concrete_features(bidirectional):
  """The DP on a sentence nothing matches: its box contains the concrete forward pass and is only
  the rounding errors wide (float32)."""
  rng = np.random.default_rng(0)
  model = LSTMClassifier(rng.normal(size=(len(VOCAB), 8)), hidden=6, projection=5,
                         bidirectional=bidirectional, pooling="attention", rngs=nnx.Rngs(0))
  space = parse_space("[(Del,2),(Sub,2),(Trans3,1)]", synonyms={"good": ["best"]})
  sentences = ["x y movie".split(), "film it y x y".split()]
  plan = PlanBuilder(space, VOCAB).build(sentences)
  box, clean = attention_features(model, space.signature, plan, jnp.asarray(1.0, jnp.float32))
  features = model.features(jnp.asarray(plan.token_ids), jnp.asarray(plan.lengths))
  assert features.dtype == jnp.float32
  assert np.all(box.lo <= features) and np.all(features <= box.hi)
  for a in (box.lo, box.hi):
    np.testing.assert_allclose(a, features, atol=1e-4)
  np.testing.assert_allclose(clean, features, atol=1e-5)


def test_attention_certification_is_differentiable():
  rng = np.random.default_rng(0)
  model = LSTMClassifier(rng.normal(size=(len(VOCAB), 8)), hidden=6, projection=5,
                         bidirectional=True, pooling="attention", rngs=nnx.Rngs(0))
  space = parse_space("[(Del,1),(Ins,1),(Sub,1)]", synonyms={"good": ["best"]})
  plan = PlanBuilder(space, VOCAB).build(["the good movie".split(), "x".split()])
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  certify_fn = make_certify_fn(graphdef, space)
  labels = jnp.asarray([1, 0])

  def loss(params):
    cert = certify_fn((params, rest), plan, labels, 0.5)
    return optax.softmax_cross_entropy_with_integer_labels(cert.worst_case_logits, labels).mean()

  grads = jax.jit(jax.grad(loss))(params)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
  assert float(jnp.abs(grads["attention"]["kernel"][...]).sum()) > 0


# -- training from the CLI ---------------------------------------------------------------------

def test_attention_arc_training_runs_from_the_cli(tmp_path):
  """experiments/train.py with configs/attention.py on the fake data root: two ARC steps with
  λ > 0 and ε = 1 from the first step, then the test certification."""
  root = write_data_root(tmp_path / "data")
  run = tmp_path / "run"
  flags = ["--config.hidden=6", "--config.lstm.projection=5", "--config.lstm.head_hidden=4",
           "--config.batch_size=2", "--config.eval_batch_size=2", "--config.num_train=4",
           "--config.num_epochs=1", "--config.lambda_start=0.5", "--config.eps_start=1.0",
           "--config.progress=False", "--config.log_every=1"]
  env = {**os.environ, "ARC_DATA_DIR": str(root),
         "ARC_CACHE_DIR": str(tmp_path / "cache"), "JAX_ENABLE_X64": "0"}
  experiments = Path(__file__).parents[2] / "experiments"
  done = subprocess.run([sys.executable, str(experiments / "train.py"),
                         f"--config={experiments / 'configs' / 'attention.py'}:lstm,del2sub2",
                         f"--workdir={run}", *flags], capture_output=True, text=True,
                        timeout=900, check=False, env=env)
  assert done.returncode == 0, done.stderr[-3000:]
  config = json.loads((run / "config.json").read_text())
  # The run name is the row's, plus a hash of the overrides (arc_jax.train.config.run_name).
  assert config["lstm"]["pooling"] == "attention"
  assert config["name"].startswith("arc_attention_lstm_del2sub2")
  logs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
  train = [r for r in logs if r["kind"] == "train"]
  assert len(train) == 2 and all(r["lambda"] == 0.5 and "train_cf_acc" in r for r in train)
  summary = json.loads((run / "summary.json").read_text())
  assert summary["status"] == "completed" and summary["test"]["examples"] == 2


def test_attention_config_rows():
  module, arc = load_script("configs/attention"), load_script("configs/arc")
  names = set()
  for model in ("lstm", "bilstm"):
    for space in ("del2sub2", "sub2ins2", "del2ins2"):
      config = module.get_config(f"{model},{space}")
      validate(config)
      assert set(config.keys()) == set(default_config().keys())
      assert config.lstm.pooling == "attention" and config.method == "arc"
      assert config.lambda_max == arc.get_config(f"{model},{space}").lambda_max
      names.add(config.name)
  assert len(names) == 6 and "arc_attention_bilstm_del2ins2" in names
  with pytest.raises(ConfigError, match="del2sub2, sub2ins2, del2ins2"):
    module.get_config("lstm,review")
