"""Training pieces without real data: schedules, losses, optimiser, steps, configs, run files."""

import json
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
from experiment_scripts import load_script
from flax import nnx

from arc_jax import interval as iv
from arc_jax.certify import Certificate
from arc_jax.data import make_batch, parse_tree
from arc_jax.nn import LSTMClassifier
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation import PlanBuilder, parse_space
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space
from arc_jax.train import (FAMILIES, METHODS, ConfigError, Method, RunDirectory, RunExistsError,
                           arc_objective, clean_objective, data_mesh, default_config, epoch_ramp,
                           init_state, make_optimizer, make_train_step, max_of_means_loss,
                           register_method, validate, worst_case_loss, zero_totals)
from arc_jax.train.config import RUN_CONTROL_FIELDS, run_name
from arc_jax.train.progress import RunClock
from arc_jax.train.losses import node_cross_entropy
from arc_jax.train.families import IndexedTrees

WORDS = ["<pad>", "a", "the", "good", "fine", "great", "bad", "movie", "film", "is", "not"]
VOCAB = {w: i for i, w in enumerate(WORDS)}
SYNONYMS = {"good": ["fine", "great"], "movie": ["film"], "bad": ["not"]}


def load_config_module(name):
  return load_script(f"configs/{name}")


# -- schedules ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ramp", [1, 2, 5, 16])
def test_epoch_ramp_is_the_original_linspace_per_epoch(ramp):
  steps_per_epoch, epochs = 7, 24
  schedule = epoch_ramp(0.0, 0.5, ramp, steps_per_epoch)
  expected = np.concatenate([np.linspace(0.0, 0.5, ramp), np.full(epochs - ramp, 0.5)])
  for epoch in range(epochs):
    values = [float(schedule(epoch * steps_per_epoch + i)) for i in (0, steps_per_epoch - 1)]
    np.testing.assert_allclose(values, expected[epoch], atol=1e-7)


def test_epoch_ramp_without_ramp_starts_at_peak_and_is_jittable():
  schedule = epoch_ramp(0.2, 0.9, 0, 3)
  assert float(jax.jit(schedule)(jnp.int32(0))) == pytest.approx(0.9)
  assert epoch_ramp(0.2, 0.9, 0, 3) is schedule


# -- losses ------------------------------------------------------------------------------------

def random_certificate(rng, labels):
  """A certificate whose margins are consistent with a random logit box."""
  lo = rng.normal(size=(len(labels), 2)).astype(np.float32)
  hi = lo + rng.uniform(0, 2, size=lo.shape).astype(np.float32)
  y = np.asarray(labels)
  other = 1 - y
  margin_other = lo[np.arange(len(y)), y] - hi[np.arange(len(y)), other] + 0.1  # tighter
  margins = np.zeros_like(lo)
  margins[np.arange(len(y)), other] = margin_other
  return Certificate(iv.Interval(jnp.asarray(lo), jnp.asarray(hi)), jnp.asarray((lo + hi) / 2),
                     jnp.asarray(margins), jnp.asarray(margin_other > 0))


def bce(d, y):
  """Binary cross-entropy of the single logit d (the original's loss)."""
  return np.log1p(np.exp(-d)) if y == 1 else np.log1p(np.exp(d))


def test_max_of_means_matches_its_binary_definition():
  rng = np.random.default_rng(0)
  labels = np.array([1, 0, 1, 1, 0])
  weights = np.array([1, 1, 1, 0, 1], np.float32)  # row 3 is padding
  cert = random_certificate(rng, labels)
  lo, hi, m = (np.asarray(a) for a in (cert.logits.lo, cert.logits.hi, cert.margins))
  d_lo = np.where(labels == 1, m[:, 0], lo[:, 1] - hi[:, 0])
  d_hi = np.where(labels == 1, hi[:, 1] - lo[:, 0], -m[:, 1])
  real = weights > 0
  expected = max(np.mean([bce(d, y) for d, y in zip(d_lo[real], labels[real])]),
                 np.mean([bce(d, y) for d, y in zip(d_hi[real], labels[real])]))
  got = max_of_means_loss(cert, jnp.asarray(labels), jnp.asarray(weights))
  np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_worst_case_bounds_max_of_means_and_equals_it_for_one_label():
  rng = np.random.default_rng(1)
  for labels in ([1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0]):
    labels = jnp.asarray(labels)
    cert = random_certificate(rng, np.asarray(labels))
    weights = jnp.ones(labels.shape)
    worst, mixed = worst_case_loss(cert, labels, weights), max_of_means_loss(cert, labels, weights)
    assert mixed <= worst + 1e-6
    if len(set(np.asarray(labels).tolist())) == 1:
      np.testing.assert_allclose(mixed, worst, rtol=1e-5)


def test_max_of_means_refuses_more_than_two_classes():
  cert = Certificate(iv.Interval(jnp.zeros((2, 3)), jnp.ones((2, 3))), jnp.zeros((2, 3)),
                     jnp.zeros((2, 3)), jnp.zeros((2,), bool))
  with pytest.raises(ValueError, match="worst_case"):
    max_of_means_loss(cert, jnp.zeros((2,), jnp.int32), jnp.ones((2,)))


def test_node_cross_entropy_averages_over_the_labelled_nodes_only():
  rng = np.random.default_rng(2)
  logits = rng.normal(size=(2, 3, 5)).astype(np.float32)
  labels = np.array([[4, -1, 0], [-1, -1, 2]])
  expected = np.mean([-jax.nn.log_softmax(logits[b, n])[labels[b, n]]
                      for b, n in zip(*np.nonzero(labels >= 0))])
  got = node_cross_entropy(jnp.asarray(logits), jnp.asarray(labels))
  np.testing.assert_allclose(got, expected, rtol=1e-5)


# -- optimiser and steps -----------------------------------------------------------------------

def test_optimizer_clips_then_adds_coupled_weight_decay_then_adam():
  lr, wd, clip = 0.1, 0.01, 0.25
  params = {"w": jnp.array([1.0, -2.0]), "b": jnp.array([0.5])}
  grads = {"w": jnp.array([3.0, 4.0]), "b": jnp.array([0.0])}
  tx = make_optimizer(lr, wd, clip)
  updates, _ = tx.update(grads, tx.init(params), params)
  norm = np.sqrt(25.0)
  for k in params:  # torch: g ← clip(g); g ← g + wd·p; Adam's first step moves by lr·sign(g)
    g = np.asarray(grads[k]) * clip / norm + wd * np.asarray(params[k])
    expected = -lr * g / (np.abs(g) + 1e-8)
    np.testing.assert_allclose(updates[k], expected, rtol=1e-5)


def test_adagrad_is_torchs_after_clipping_and_coupled_weight_decay():
  lr, wd, clip = 0.05, 1e-2, 0.25
  params = {"w": jnp.array([1.0, -2.0])}
  tx = make_optimizer(lr, wd, clip, "adagrad")
  state = tx.init(params)
  p, accumulated = np.array([1.0, -2.0]), np.zeros(2)
  for g in ([3.0, 4.0], [0.1, -0.05]):  # the first is clipped, the second is not
    updates, state = tx.update({"w": jnp.array(g)}, state, params)
    params = optax.apply_updates(params, updates)
    g = np.array(g) * min(1.0, clip / np.linalg.norm(g)) + wd * p  # torch: clip, then + wd·p
    accumulated += g ** 2
    p = p - lr * g / (np.sqrt(accumulated) + 1e-10)
    np.testing.assert_allclose(params["w"], p, rtol=1e-5)



def test_embedding_group_gets_scaled_learning_rate_and_no_weight_decay():
  lr, wd, clip, scale = 0.05, 1e-2, 10.0, 0.1
  params = {"embeddings": jnp.array([1.0, -2.0]), "w": jnp.array([1.0, -2.0])}
  grads = {"embeddings": jnp.array([0.3, 0.4]), "w": jnp.array([0.3, 0.4])}
  tx = make_optimizer(lr, wd, clip, "adagrad", embedding_lr_scale=scale)
  updates, _ = tx.update(grads, tx.init(params), params)
  for name, rate, decay in (("embeddings", scale * lr, 0.0), ("w", lr, wd)):
    g = np.asarray(grads[name]) + decay * np.asarray(params[name])  # Adagrad's first step
    np.testing.assert_allclose(updates[name], -rate * g / (np.abs(g) + 1e-10), rtol=1e-5)
  one_group = make_optimizer(lr, wd, clip, "adagrad")
  plain, _ = one_group.update(grads, one_group.init(params), params)
  assert not np.allclose(plain["embeddings"], updates["embeddings"])

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


# -- configs and methods -----------------------------------------------------------------------

PAPER_ROWS = {
    "arc": ["lstm,del2sub2", "lstm,sub2ins2", "lstm,del2ins2", "lstm,review", "bilstm,del2sub2",
            "bilstm,sub2ins2", "bilstm,del2ins2"],
    "augment": ["lstm,del2sub2", "lstm,sub2ins2", "lstm,del2ins2", "lstm,review",
                "bilstm,del2sub2", "bilstm,sub2ins2", "bilstm,del2ins2"],
    "hotflip": ["lstm,del2sub2", "lstm,sub2ins2", "lstm,del2ins2", "lstm,review",
                "bilstm,del2sub2", "bilstm,sub2ins2", "bilstm,del2ins2"],
    "normal": ["lstm", "bilstm"],
    "imdb": ["sub1", "sub2"],
    "tree": ["normal", "arc,del2sub2", "arc,sub2ins2", "arc,del2ins2", "augment,del2sub2",
             "augment,sub2ins2", "augment,del2ins2", "hotflip,del2sub2", "hotflip,sub2ins2",
             "hotflip,del2ins2"],
}


def test_every_paper_row_has_a_valid_config_with_its_lambda():
  names = set()
  for family, rows in PAPER_ROWS.items():
    module = load_config_module(family)
    for row in rows:
      config = module.get_config(row)
      validate(config)
      assert set(config.keys()) == set(default_config().keys())
      names.add(config.name)
  assert len(names) == sum(map(len, PAPER_ROWS.values()))
  arc = load_config_module("arc")
  assert arc.get_config().to_dict() == default_config().to_dict()
  assert [arc.get_config(r).lambda_max for r in PAPER_ROWS["arc"]] == [0.5, 0.6, 0.9, 0.8, 0.5,
                                                                       0.9, 0.7]
  imdb = load_config_module("imdb").get_config("sub2")
  assert (imdb.pooling, imdb.num_epochs, imdb.ramp_epochs, imdb.lambda_max) == ("mean", 30, 20,
                                                                                0.8)
  normal = load_config_module("normal").get_config()
  assert (normal.method, normal.early_stopping, normal.num_epochs) == ("normal", 5, 24)
  for family in ("augment", "hotflip"):
    module = load_config_module(family)
    configs = [module.get_config(r) for r in PAPER_ROWS[family]]
    assert {(c.method, c.early_stopping, c.lambda_max) for c in configs} == {(family, 5, 0.0)}
  for family in ("arc", "augment", "hotflip"):
    module = load_config_module(family)
    assert [module.get_config(r).max_candidates for r in ("lstm,review", "lstm,del2sub2")] == [0, 1]
    assert module.get_config("bilstm,sub2ins2").bidirectional


def test_tree_rows_follow_the_original_tree_script():
  tree = load_config_module("tree")
  configs = {row: tree.get_config(row) for row in PAPER_ROWS["tree"]}
  for c in configs.values():
    assert (c.model, c.dataset, c.optimizer, c.batch_size, c.learning_rate, c.weight_decay,
            c.grad_clip, c.hidden, c.dropout_rate, c.synonyms, c.max_candidates,
            c.trainable_embeddings, c.embedding_lr_scale) == (
                "tree_lstm", "sst_trees", "adagrad", 20, 0.05, 1e-4, 0.25, 150, 0.5, "ppdb", 1,
                True, 0.1)
  arc = [configs[f"arc,{s}"] for s in ("del2sub2", "sub2ins2", "del2ins2")]
  assert [(c.lambda_max, c.num_epochs, c.ramp_epochs) for c in arc] == [
      (0.07, 30, 20), (0.06, 30, 20), (0.07, 30, 20)]
  assert [c.space for c in arc] == ["[(Del,2),(Sub,2)]", "[(Sub,2),(Ins,2)]", "[(Del,2),(Ins,2)]"]
  normal, augment = configs["normal"], configs["augment,sub2ins2"]
  assert (normal.name, normal.method, normal.num_epochs, normal.early_stopping) == (
      "normal_tree", "normal", 50, 10)
  assert (augment.name, augment.num_epochs, augment.early_stopping, augment.lambda_max) == (
      "augment_tree_sub2ins2", 30, 5, 0.0)
  assert tree.get_config().name == "arc_tree_del2sub2"
  hotflip = configs["hotflip,del2ins2"]
  assert (hotflip.name, hotflip.method, hotflip.num_epochs, hotflip.early_stopping,
          hotflip.lambda_max, hotflip.space) == (
              "hotflip_tree_del2ins2", "hotflip", 30, 5, 0.0, "[(Del,2),(Ins,2)]")
  with pytest.raises(ValueError, match="No Tree-LSTM row 'hotflip'.*hotflip,del2ins2"):
    tree.get_config("hotflip")


@pytest.mark.parametrize("changes, message", [
    (dict(dataset="sst_trees"), "not a dataset of model 'lstm'.*config.model='tree_lstm'"),
    (dict(model="tree_lstm"), "not a dataset of model 'tree_lstm'"),
    (dict(model="tree_lstm", dataset="sst_trees", robust_loss="max_of_means"), "'worst_case'"),
    (dict(model="gru"), "'lstm', 'tree_lstm'"),
    (dict(optimizer="sgd"), "'adagrad', 'adam'"),
    (dict(trainable_embeddings=True), "trainable_embeddings=True is not available for .*'lstm'"),
    (dict(space="[(Dell,2)]"), r"config.space='\[\(Dell,2\)\]': Unknown transformation 'Dell'. "
     "Valid names: Del, Ins"),
    (dict(space="[(Del,2)"), r"config.space=.*: .*position"),
    (dict(model="tree_lstm", dataset="sst_trees", space="[(Trans1,1)]"),
     "Trans1 .* has no tree counterpart"),
])
def test_model_dataset_method_and_optimizer_must_fit_together(changes, message):
  config = default_config()
  config.update(changes)
  with pytest.raises(ConfigError, match=message):
    validate(config)


def test_unknown_rows_and_settings_name_the_choices():
  with pytest.raises(ValueError, match="lstm,del2sub2"):
    load_config_module("arc").get_config("bilstm,review")
  with pytest.raises(ValueError, match="No hotflip row 'lstm,sub3'.*bilstm,del2ins2"):
    load_config_module("hotflip").get_config("lstm,sub3")
  config = default_config()
  config.method = "fgsm"
  with pytest.raises(ValueError, match="'arc'.*'hotflip'"):
    validate(config)


def test_train_script_reports_a_bad_setting_with_status_2_and_writes_nothing(tmp_path):
  run = tmp_path / "run"
  done = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "experiments" / "train.py"),
                         "--config.optimizer=sgd", f"--workdir={run}"],
                        capture_output=True, text=True, timeout=600, check=False)
  assert done.returncode == 2, done.stderr[-2000:]
  assert "error: config.optimizer='sgd' is unknown; choose one of ['adagrad', 'adam']" in done.stderr
  assert "Traceback" not in done.stderr and not run.exists()


def test_method_registry_is_the_extension_point():
  assert {"normal", "augment", "hotflip", "arc"} <= set(METHODS)
  assert METHODS["arc"].curriculum and not METHODS["augment"].curriculum
  assert not METHODS["hotflip"].curriculum and METHODS["hotflip"].batch_transform is not None
  with pytest.raises(ValueError, match="already registered"):
    register_method("arc", Method(curriculum=True))


# -- run directory -----------------------------------------------------------------------------

def test_run_directory_resumes_unfinished_and_refuses_finished(tmp_path):
  config = default_config()
  run = RunDirectory(tmp_path / "run")
  assert run.start(config) is False
  assert json.loads(run.config_file.read_text())["name"] == config.name
  changed = ml_collections.ConfigDict(config.to_dict())
  for field in RUN_CONTROL_FIELDS:
    changed[field] = 7 if field != "progress" else False
  assert RunDirectory(run.path).start(changed) is True
  changed.lambda_max = 0.9
  with pytest.raises(RunExistsError, match="lambda_max: 0.5 there, 0.9 now"):
    RunDirectory(run.path).start(changed)
  run.log({"step": 3})
  run.log({"step": 9})
  run.truncate_log(5)
  assert run.metrics_file.read_text().splitlines() == ['{"step": 3}']
  run.write_summary({"status": "completed"})
  (run.path / "notes.txt").write_text("mine")
  with pytest.raises(RunExistsError, match="--overwrite"):
    RunDirectory(run.path).start(config)
  assert RunDirectory(run.path).start(config, overwrite=True) is False
  assert sorted(p.name for p in run.path.iterdir()) == ["config.json", "notes.txt"]


def test_runs_written_before_a_field_existed_resume_with_its_default(tmp_path):
  config = default_config()
  older = {k: v for k, v in config.to_dict().items() if k not in ("model", "optimizer")}
  (tmp_path / "config.json").write_text(json.dumps(older))
  run = RunDirectory(tmp_path)
  assert (run.config().model, run.config().optimizer) == ("lstm", "adam")
  assert run.start(config) is True


def test_run_directory_refuses_a_foreign_directory(tmp_path):
  (tmp_path / "data.csv").write_text("x")
  with pytest.raises(RunExistsError, match="another --workdir"):
    RunDirectory(tmp_path).start(default_config())


# -- run names and the space guard -------------------------------------------------------------

def test_run_names_follow_the_overridden_fields():
  arc = load_config_module("arc").get_config()
  assert run_name(arc, {}) == run_name(arc, {"progress", "data_dir"}) == "arc_lstm_del2sub2"
  arc.space = "[(Ins,2),(Sub,2)]"  # a paper space in another order keeps its key
  assert run_name(arc, {"space"}) == "arc_lstm_sub2ins2"
  arc.space, arc.seed = "[(Del,50),(Sub,50)]", 1
  assert run_name(arc, {"space", "seed", "max_steps"}) == "arc_lstm_del50sub50_seed1"
  normal = load_config_module("normal").get_config()
  assert run_name(normal, {}) == "normal_lstm"
  normal.bidirectional = True
  assert run_name(normal, {"bidirectional"}) == "normal_bilstm_del2sub2"
  tree = load_config_module("tree").get_config("augment,sub2ins2")
  assert run_name(tree, {"method"}) == "augment_tree_sub2ins2"
  tree.name = "mine"
  assert run_name(tree, {"name", "seed"}) == "mine"
  # Many overrides: a hash of them instead of a long name.
  assert re.fullmatch(r"augment_tree_sub2ins2_[0-9a-f]{8}",
                      run_name(tree, set(tree.keys()) - {"name"}))


def test_spaces_too_large_for_the_machine_are_refused_with_the_estimate():
  config = default_config()
  space = parse_space("[(Del,2),(Sub,2)]", synonyms={})
  assert space.grid_size() == 9
  # (1 + m) branches × (lo, hi) × (h, c) × B × C × H float32 values per position.
  assert space.signature.dp_memory_estimate(32, 100, 64) == 3 * 2 * 2 * 32 * 9 * 100 * 4 * 64
  config.space = "[(Del,50),(Sub,50)]"
  with pytest.raises(ConfigError, match=r"2,601 budget slots per position; its DP states alone "
                     r"need about 23\.8 GiB per batch of 32 .*allow_large_space=True"):
    validate(config)
  config.allow_large_space = True
  validate(config)


def test_run_clock_leaves_compilation_out_and_times_each_kind_of_step():
  clock = RunClock(steps_per_epoch=10, epoch_kinds=["clean", "arc", "arc"])
  assert clock.eta(0) == "?"
  clock.step_done("clean", 60.0, compiled=True)  # a compiling step is not a rate
  assert clock.eta(1) == "?"
  for _ in range(9):
    clock.step_done("clean", 1.0, compiled=False)
  clock.eval_done(5.0)
  # ARC steps not timed yet: a lower bound, counting the evaluations after epochs 1 and 2.
  assert clock.remaining(10) == (10.0, False) and clock.eta(10) == ">0:00:10"
  clock.step_done("arc", 4.0, compiled=False)
  assert clock.remaining(11) == (9 * 4.0 + 5.0 + 10 * 4.0 + 5.0, True)
  assert clock.eta(11) == "0:01:26"
