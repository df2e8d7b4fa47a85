"""Data parallelism: ARC train steps, certification and HotFlip on 8 forced CPU devices match one
device.

XLA_FLAGS must be set before JAX initialises, so each check runs in a subprocess that builds a
tiny model, space and batch, runs two ARC training steps (dropout on) and one certification on a
mesh of 1 device and on a mesh of all 8, and compares the results: for the LSTM (sentences and
DP plans sharded by rows; also the HotFlip attack of HF Acc) and the Tree-LSTM (trees sharded by
rows, the schedule replicated).
"""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from arc_jax.attacks import hotflip_robustness
    from arc_jax.certify import certify_jit
    from arc_jax.data import make_batch
    from arc_jax.nn import LSTMClassifier
    from arc_jax.perturbation import PlanBuilder, parse_space
    from arc_jax.train import (FAMILIES, arc_objective, batch_sharded, certify_rows, data_mesh,
                               epoch_ramp, init_state, make_eval_step, make_optimizer,
                               make_train_step, replicated, zero_totals)
    from arc_jax.parallel import put

    assert jax.device_count() == 8, jax.devices()
    words = ["<pad>", "a", "the", "good", "fine", "great", "bad", "movie", "film", "is", "not"]
    vocab = {w: i for i, w in enumerate(words)}
    space = parse_space("[(Del,2),(Sub,1)]", synonyms={"good": ["fine", "great"], "bad": ["not"]})
    rng = np.random.default_rng(0)
    sentences = [tuple(rng.choice(words[1:], size=rng.integers(1, 8))) for _ in range(13)]
    batch = make_batch(sentences, rng.integers(0, 2, size=13), range(13), vocab, 16,
                       plan_builder=PlanBuilder(space, vocab))
    embeddings = rng.normal(size=(len(words), 6)).astype(np.float32)

    results, attacks = {}, {}
    for n in (1, 8):
      mesh = data_mesh(jax.devices()[:n])
      model = LSTMClassifier(embeddings, hidden=8, projection=6, head_hidden=5, dropout_rate=0.2,
                             rngs=nnx.Rngs(0))
      graphdef, params, rest = nnx.split(model, nnx.Param, ...)
      tx = make_optimizer(1e-2, 1e-4, 0.25)
      objective = arc_objective(FAMILIES["lstm"], space.signature, epoch_ramp(0.5, 0.5, 0, 1),
                                epoch_ramp(1.0, 1.0, 0, 1), "worst_case")
      step = make_train_step(graphdef, tx, objective, mesh, 1)  # one call: the same dropout masks
      state = put(init_state(params, tx, 0), replicated(mesh))
      rest, totals = put(rest, replicated(mesh)), put(zero_totals(), replicated(mesh))
      sharded = put(batch, batch_sharded(mesh))
      assert len(sharded.plan.transformations[1].replacement_ids.addressable_shards) == n
      for _ in range(2):
        state, totals = step(state, rest, sharded, totals)
      assert state.params["head_out"]["kernel"].value.sharding.is_fully_replicated
      flags = make_eval_step(graphdef, certify_rows(FAMILIES["lstm"], space.signature), mesh)(
          state.params, rest, sharded)
      cert = certify_jit(graphdef, space.signature, (state.params, rest), sharded.plan,
                         sharded.labels)
      results[n] = jax.device_get((state.params, totals, flags, cert.margins, cert.logits))
      # HotFlip: 4 sentences × beam 3 = 12 rows per call, padded to 16 on 8 devices.
      hf = hotflip_robustness(graphdef, (state.params, rest), space, sentences, batch.labels[:13],
                              vocab, beam=3, batch_size=4, mesh=mesh)
      attacks[n] = (hf.correct, hf.robust, hf.candidates)

    one, eight = results[1], results[8]
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(eight)):
      np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    assert one[1]["certify_examples"] == 2 * 13
    assert attacks[1] is not attacks[8] and len(attacks[8][2]) == 13
    np.testing.assert_array_equal(attacks[1][0], attacks[8][0])
    np.testing.assert_array_equal(attacks[1][1], attacks[8][1])
    assert attacks[1][2] == attacks[8][2] and any(attacks[8][2])
    print("parallel OK", float(one[1]["loss"]), int(one[2]["certified"].sum()))
""")


TREE_SCRIPT = textwrap.dedent("""
    import jax
    import numpy as np
    from flax import nnx

    from arc_jax.data import parse_tree
    from arc_jax.nn.tree_models import TreeLSTMClassifier
    from arc_jax.perturbation import parse_space
    from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space
    from arc_jax.train import (FAMILIES, arc_objective, certify_rows, data_mesh, epoch_ramp,
                               init_state, make_eval_step, make_optimizer, make_train_step,
                               replicated, zero_totals)
    from arc_jax.parallel import put
    from arc_jax.train.families import IndexedTrees

    assert jax.device_count() == 8, jax.devices()
    words = ["<pad>", "a", "the", "good", "fine", "great", "bad", "movie", "film", "is", "not"]
    vocab = {w: i for i, w in enumerate(words)}
    space = tree_space(parse_space("[(Del,2),(Sub,1)]",
                                   synonyms={"good": ["fine", "great"], "bad": ["not"]}))
    rng = np.random.default_rng(0)

    def random_tree():
      nodes = [f"({rng.integers(5)} {w})" for w in rng.choice(words[1:], size=rng.integers(1, 7))]
      while len(nodes) > 1:
        i = int(rng.integers(len(nodes) - 1))
        nodes[i:i + 2] = [f"({rng.integers(5)} {nodes[i]} {nodes[i + 1]})"]
      return parse_tree(nodes[0])

    trees = [random_tree() for _ in range(13)]
    batch = IndexedTrees(TreeBatchBuilder(vocab, space).build(trees, 16),
                         np.array(list(range(13)) + [-1] * 3, np.int32))
    embeddings = rng.normal(size=(len(words), 6)).astype(np.float32)
    family = FAMILIES["tree_lstm"]

    results = {}
    for n in (1, 8):
      mesh = data_mesh(jax.devices()[:n])
      model = TreeLSTMClassifier(embeddings, hidden=8, dropout_rate=0.5, rngs=nnx.Rngs(0))
      graphdef, params, rest = nnx.split(model, nnx.Param, ...)
      tx = make_optimizer(5e-2, 1e-4, 0.25, "adagrad")
      objective = arc_objective(family, space.signature, epoch_ramp(0.5, 0.5, 0, 1),
                                epoch_ramp(1.0, 1.0, 0, 1), "worst_case")
      step = make_train_step(graphdef, tx, objective, mesh)
      state = put(init_state(params, tx, 0), replicated(mesh))
      rest, totals = put(rest, replicated(mesh)), put(zero_totals(), replicated(mesh))
      sharded = family.lowering.put(batch, mesh)
      assert len(sharded.trees.token_ids.addressable_shards) == n
      assert sharded.trees.schedule.sharding.is_fully_replicated
      for _ in range(2):
        state, totals = step(state, rest, sharded, totals)
      flags = make_eval_step(graphdef, certify_rows(family, space.signature), mesh)(
          state.params, rest, sharded)
      results[n] = jax.device_get((state.params, totals, flags))

    one, eight = results[1], results[8]
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(eight)):
      np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    assert one[1]["certify_examples"] == 2 * 13
    print("parallel OK", float(one[1]["loss"]), int(one[2]["certified"].sum()))
""")


@pytest.mark.parametrize("script", [SCRIPT, pytest.param(TREE_SCRIPT, marks=pytest.mark.slow)],
                         ids=["lstm", "tree_lstm"])
def test_train_step_and_certification_match_on_8_devices(script):
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
             JAX_PLATFORMS="cpu")
  done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                        timeout=600)
  assert done.returncode == 0, done.stdout + done.stderr
  assert "parallel OK" in done.stdout
