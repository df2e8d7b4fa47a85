"""Training methods (arc_jax.train.methods): the registry, and a toy method (a certified hinge
loss on ARC's worst-case margins) added without touching the library and trained from a
config."""

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from tests.helpers.fake_data_root import use_random_sst2

from arc_jax.certify import certify_model
from arc_jax.train import METHODS, Method, default_config, register_method, train_and_evaluate
from arc_jax.train.steps import RowMetrics

TRACED = []


def certified_hinge(experiment, robust_weight, eps):
  """Objective factory: mean over rows of max(0, 1 − min_{j≠y} margin_j), the margins certified
  by ARC's DP under the experiment's space (λ is ignored: the whole loss is robust)."""
  del robust_weight
  signature = experiment.space.signature

  def objective(model, batch, dropout_key, step):
    TRACED.append(step)
    cert = certify_model(model, signature, batch.plan, batch.labels, eps(step), dropout_key)
    others = jnp.arange(cert.margins.shape[1])[None, :] != batch.labels[:, None]
    worst = jnp.min(jnp.where(others, cert.margins, jnp.inf), axis=1)
    loss = jnp.sum(batch.weights * jax.nn.relu(1.0 - worst)) / jnp.maximum(batch.weights.sum(), 1)
    correct = jnp.argmax(cert.clean_logits, axis=1) == batch.labels
    return loss, RowMetrics(batch.weights, correct, cert.certified)

  return objective


if "certified_hinge_test" not in METHODS:
  register_method("certified_hinge_test", Method(certified_hinge, curriculum=True))


def test_a_method_defined_outside_the_library_trains_from_a_config(tmp_path, monkeypatch):
  use_random_sst2(tmp_path, monkeypatch)

  c = default_config()
  c.method = "certified_hinge_test"
  c.space = "[(Del,1),(Sub,1)]"
  c.hidden, c.lstm.projection = 4, 3
  c.batch_size = c.eval_batch_size = 8
  c.num_epochs, c.log_every = 1, 1
  c.lambda_start = c.lambda_max = 0.5  # λ > 0 from the first step: the method's objective runs
  c.progress = False
  TRACED.clear()
  c.name = "toy_method"
  summary = train_and_evaluate(c, tmp_path / "run")

  assert summary["status"] == "completed" and summary["steps"] == 2
  assert TRACED, "the registered objective was never used"
  config = json.loads((tmp_path / "run" / "config.json").read_text())
  assert config["method"] == "certified_hinge_test"
  train_lines = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text()
                 .splitlines() if json.loads(l)["kind"] == "train"]
  assert [r["step"] for r in train_lines] == [1, 2]
  assert all(0.0 <= r["loss"] for r in train_lines)
  assert summary["selection"] == "dev_cf_acc"  # a certified method's default
  assert summary["test"]["certified"] <= summary["test"]["correct"] <= 8


def test_method_registry_is_the_extension_point():
  assert {"normal", "augment", "hotflip", "arc"} <= set(METHODS)
  assert METHODS["arc"].curriculum and not METHODS["augment"].curriculum
  assert not METHODS["hotflip"].curriculum and METHODS["hotflip"].batch_transform is not None
  with pytest.raises(ValueError, match="already registered"):
    register_method("arc", Method(curriculum=True))
