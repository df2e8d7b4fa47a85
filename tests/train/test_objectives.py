"""The objectives written once over a model family (arc_jax.train.objectives), in jitted train
steps."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from arc_jax import interval
from arc_jax.data import make_batch, parse_tree
from arc_jax.domain import lstm_update_by_rules
from arc_jax.nn import LSTMClassifier
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation import PlanBuilder, parse_space
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space
from arc_jax.train import (FAMILIES, arc_objective, clean_objective, data_mesh, epoch_ramp,
                           init_state, make_optimizer, make_train_step, zero_totals)
from arc_jax.train.families import IndexedTrees
from arc_jax.train.steps import MeanObjective, PartsTrainStep

WORDS = ["<pad>", "a", "the", "good", "fine", "great", "bad", "movie", "film", "is", "not"]
VOCAB = {w: i for i, w in enumerate(WORDS)}
SYNONYMS = {"good": ["fine", "great"], "movie": ["film"], "bad": ["not"]}


TREES = ("(4 (2 the) (4 (4 good) (2 movie)))", "(0 (2 a) (0 (0 bad) (2 film)))", "(4 good)",
         "(0 (0 bad) (2 movie))")


def tiny_setup(model_kind="lstm"):
  """A small model, space, batch, and the clean and ARC steps (λ, ε: 0 at step 0, then 0.5, 1)
  of the model family ``model_kind``: four sentences, or the same as trees with labels on every node."""
  rng = np.random.default_rng(0)
  embeddings = rng.normal(size=(len(WORDS), 4)).astype(np.float32)
  space = parse_space("[(Del,1),(Sub,1)]", synonyms=SYNONYMS)
  if model_kind == "lstm":
    model = LSTMClassifier(embeddings, hidden=5, projection=4, head_hidden=3, dropout_rate=0.0,
                           rngs=nnx.Rngs(0))
    sentences = [("the", "good", "movie"), ("a", "bad", "film"), ("good",), ("bad", "movie")]
    batch = make_batch(sentences, [1, 0, 1, 0], range(4), VOCAB, 4,
                       plan_builder=PlanBuilder(space, VOCAB))
  else:
    model = TreeLSTMClassifier(embeddings, hidden=8, dropout_rate=0.0, rngs=nnx.Rngs(0))
    space = tree_space(space)
    batch = IndexedTrees(TreeBatchBuilder(VOCAB, space).build([parse_tree(t) for t in TREES]),
                         np.arange(4))
  family = FAMILIES[model_kind]
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  tx = make_optimizer(3e-2, 0.0, 1.0)
  objective = arc_objective(family, space.signature, epoch_ramp(0.0, 0.5, 2, 1),
                            epoch_ramp(0.0, 1.0, 2, 1), "worst_case")
  mesh = data_mesh(jax.devices()[:1])
  steps = (make_train_step(graphdef, tx, clean_objective(family), mesh),
           make_train_step(graphdef, tx, objective, mesh))
  fresh = lambda: init_state(jax.tree.map(jnp.copy, params), tx, 0)  # steps donate the state
  return fresh, rest, batch, steps


@pytest.mark.parametrize("model_kind", ["lstm", "tree_lstm"])
def test_arc_step_with_zero_lambda_and_eps_is_the_clean_step(model_kind):
  """λ = 0, ε = 0: the DP's slot 0 gives the clean forward pass, so both steps agree."""
  fresh, rest, batch, steps = tiny_setup(model_kind)
  results = [step(fresh(), rest, batch, zero_totals()) for step in steps]
  (clean, clean_totals), (arc, arc_totals) = jax.device_get(results)
  for a, b in zip(jax.tree.leaves(clean.params), jax.tree.leaves(arc.params)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(clean_totals["loss"], arc_totals["loss"], rtol=1e-6)
  assert clean_totals["examples"] == arc_totals["examples"] == 4
  assert arc_totals["certify_examples"] == 4 and clean_totals["certify_examples"] == 0


@pytest.mark.parametrize("model_kind", ["lstm", pytest.param("tree_lstm", marks=pytest.mark.slow)])
def test_arc_steps_learn_to_certify(model_kind):
  fresh, rest, batch, (_, step) = tiny_setup(model_kind)
  state, losses = fresh(), []
  for _ in range(60):
    state, totals = step(state, rest, batch, zero_totals())
    losses.append(float(totals["loss"]) / 4)
  assert int(state.step) == 60
  assert np.mean(losses[-5:]) < 0.2 * np.mean(losses[1:6])
  assert totals["certified"] == 4


def test_arc_objective_on_the_reachable_grid_equals_the_full_grid():
  """Training batches (the family's ``lower``) run the DP on their rows' reachable grid; the ARC
  loss and its gradient are those of the full grid (float64, dropout on: the same masks)."""
  family = FAMILIES["lstm"]
  space = parse_space("[(Del,2),(Sub,2)]", synonyms=SYNONYMS)
  sentences = [("the", "good", "movie"), ("bad", "film"), ("good",), ("is", "not")]
  with jax.enable_x64(True):
    model = LSTMClassifier(np.random.default_rng(0).normal(size=(len(WORDS), 4)), hidden=5,
                           projection=4, head_hidden=3, dropout_rate=0.3, rngs=nnx.Rngs(0),
                           param_dtype=jnp.float64)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    batch = family.lowering.lower(PlanBuilder(space, VOCAB), sentences, [1, 0, 1, 0], range(4), 4, True)
    assert batch.plan.reachable == (1, 2)  # one deletable "the"; Sub reaches both applications
    full = dataclasses.replace(batch, plan=dataclasses.replace(batch.plan, reachable=None))
    objective = arc_objective(family, space.signature, optax.constant_schedule(0.5),
                              optax.constant_schedule(1.0), "worst_case")
    loss = jax.jit(jax.value_and_grad(
        lambda p, b: objective(nnx.merge(graphdef, p, rest), b, jax.random.key(1), 0)[0]))
    (cut_loss, cut_grads), (full_loss, full_grads) = jax.device_get(
        (loss(params, batch), loss(params, full)))
  assert cut_loss.dtype == np.float64 and cut_loss > 0
  np.testing.assert_allclose(cut_loss, full_loss, rtol=1e-12)
  for a, b in zip(jax.tree.leaves(cut_grads), jax.tree.leaves(full_grads)):
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


def test_arc_gradient_through_the_hand_written_backward_passes_equals_autodiff(monkeypatch):
  """The ARC loss's gradient through the unrounded LSTM update's and affine maps' own backward
  passes equals autodiff's through the same forward passes (float64, dropout on, reachable
  grid), and the unrounded update matches the domain's rules."""
  family = FAMILIES["lstm"]
  space = parse_space("[(Del,2),(Sub,2)]", synonyms=SYNONYMS)
  sentences = [("the", "good", "movie"), ("bad", "film"), ("good",), ("is", "not")]
  with jax.enable_x64(True):
    model = LSTMClassifier(np.random.default_rng(0).normal(size=(len(WORDS), 4)) * 3, hidden=5,
                           projection=4, head_hidden=3, dropout_rate=0.3, rngs=nnx.Rngs(0),
                           param_dtype=jnp.float64)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    batch = family.lowering.lower(PlanBuilder(space, VOCAB), sentences, [1, 0, 1, 0], range(4), 4, True)
    objective = arc_objective(family, space.signature, optax.constant_schedule(0.5),
                              optax.constant_schedule(1.0), "worst_case")
    loss = lambda p: objective(nnx.merge(graphdef, p, rest), batch, jax.random.key(1), 0)[0]
    own = jax.device_get(jax.jit(jax.value_and_grad(loss))(params))
    for name, forward in (("_unrounded_lstm_update", "_unrounded_lstm_forward"),
                          ("_unrounded_linear", "_unrounded_linear_forward")):
      forward = getattr(interval, forward)  # the same forward pass, differentiated by JAX
      monkeypatch.setattr(interval, name, lambda *a, f=forward: f(*a)[0])
    auto = jax.device_get(jax.jit(jax.value_and_grad(lambda p: loss(p)))(params))
    monkeypatch.setattr(interval.IntervalDomain, "lstm_update",
                        lambda d, *a: lstm_update_by_rules(d, *a))
    rules = jax.device_get(jax.jit(jax.value_and_grad(lambda p: loss(p) + 0))(params))
  assert own[0].dtype == np.float64 and own[0] > 0
  for ref in (auto, rules):
    np.testing.assert_allclose(own[0], ref[0], rtol=1e-14)
    for a, b in zip(jax.tree.leaves(own[1]), jax.tree.leaves(ref[1])):
      np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-14)


def rows_of(take_rows):
  """``take_rows`` as a plain function (chex.assert_max_traces reads its source and name)."""

  def take(batch, start, size):
    return take_rows(batch, start, size)

  return take


def test_a_step_on_row_parts_equals_the_step_on_the_whole_batch():
  """The gradient summed over row parts (two parts of 3 and 2 rows, one a padding row) computed
  in concurrent calls gives the whole batch's step (float64, no dropout): the same parameters,
  loss and counts. Equal parts trace the part call once per batch shape: the objective's
  ``take_rows``, called once per trace of the part, is wrapped in ``chex.assert_max_traces``."""
  family = FAMILIES["lstm"]
  space = parse_space("[(Del,1),(Sub,1)]", synonyms=SYNONYMS)
  sentences = [("the", "good", "movie"), ("a", "bad", "film"), ("good",), ("bad", "movie")]
  with jax.enable_x64(True):
    model = LSTMClassifier(np.random.default_rng(0).normal(size=(len(WORDS), 4)) * 3, hidden=5,
                           projection=4, head_hidden=3, dropout_rate=0.0, rngs=nnx.Rngs(0),
                           param_dtype=jnp.float64)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    builder = PlanBuilder(space, VOCAB)
    batches = [family.lowering.lower(builder, sentences, [1, 0, 1, 0], range(4), size, True)
               for size in (5, 4)]
    tx = make_optimizer(3e-2, 1e-4, 1.0)
    objective = arc_objective(family, space.signature, optax.constant_schedule(0.5),
                              optax.constant_schedule(1.0), "worst_case")
    chex.clear_trace_counter()
    # The 5-row batch traces parts of 3 and 2 rows; the 4-row batch one part of 2.
    objective = dataclasses.replace(
        objective, take_rows=chex.assert_max_traces(rows_of(objective.take_rows), n=3))
    mesh = data_mesh(jax.devices()[:1])
    whole, parts = (make_train_step(graphdef, tx, objective, mesh, n) for n in (1, 2))
    assert isinstance(parts, PartsTrainStep) and not isinstance(whole, PartsTrainStep)
    fresh = lambda: init_state(jax.tree.map(jnp.copy, params), tx, 0)
    for batch in batches:
      (state_1, totals_1), (state_2, totals_2) = (
          jax.device_get(step(fresh(), rest, batch, zero_totals())) for step in (whole, parts))
      assert totals_1["loss"].dtype == np.float64 and totals_1["loss"] > 0
      np.testing.assert_allclose(totals_2["loss"], totals_1["loss"], rtol=1e-13)
      for key in ("correct", "examples", "certified", "certify_examples"):
        assert totals_2[key] == totals_1[key]
      assert totals_1["examples"] == 4
      for a, b in zip(jax.tree.leaves(state_2.params), jax.tree.leaves(state_1.params)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_objectives_that_are_no_weighted_mean_keep_the_batch_whole():
  """max_of_means takes a max over whole-batch means, so its step is one call; the clean
  objective's step is one call too (it has no DP to share out)."""
  family = FAMILIES["lstm"]
  space = parse_space("[(Del,1),(Sub,1)]", synonyms=SYNONYMS)
  model = LSTMClassifier(np.zeros((len(WORDS), 4), np.float32), hidden=5, projection=4,
                         head_hidden=3, rngs=nnx.Rngs(0))
  graphdef, _, _ = nnx.split(model, nnx.Param, ...)
  tx, mesh = make_optimizer(3e-2, 0.0, 1.0), data_mesh(jax.devices()[:1])
  ramp = optax.constant_schedule(0.5)
  assert isinstance(arc_objective(family, space.signature, ramp, ramp, "worst_case"),
                    MeanObjective)
  for objective in (arc_objective(family, space.signature, ramp, ramp, "max_of_means"),
                    clean_objective(family)):
    assert not isinstance(make_train_step(graphdef, tx, objective, mesh, 2), PartsTrainStep)
