"""The CNN model family (``config.model = "cnn"``): registered with its settings block, trains on
SST-2 batches with ARC and the baselines (normal, data augmentation, HotFlip), is kept, reloads with ``load_run``, and evaluates
Acc / CF / HF / EX; and experiments/configs/a3t_cnn.py gives the paper's Table 4 A3T rows on it."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.fake_data_root import use_random_sst2

from arc_jax import load_run
from arc_jax.certify import certify
from arc_jax.nn.cnn import CNNClassifier
from arc_jax.train import default_config, train_and_evaluate
from arc_jax.train.families import FAMILIES
from arc_jax.train.families.cnn import CNN, SETTINGS

REPO = Path(__file__).resolve().parents[2]


def cnn_config(method: str):
  c = default_config()
  c.model, c.method = "cnn", method
  c.name = f"{method}_cnn_test"
  c.cnn.filters, c.cnn.kernel_width = 4, 2
  c.dropout_rate = 0.0
  c.space = "[(Del,1),(Sub,1)]"
  c.batch_size = c.eval_batch_size = 8
  c.num_epochs, c.log_every = 1, 1
  c.progress = False
  return c


def test_the_family_is_registered_with_its_settings():
  assert FAMILIES["cnn"] is CNN
  assert CNN.settings is SETTINGS and SETTINGS.name == "cnn"
  assert SETTINGS.defaults().to_dict() == {"filters": 100, "kernel_width": 5}
  assert not CNN.unsupported_methods


def test_arc_trains_a_cnn_that_reloads_and_evaluates(tmp_path, monkeypatch):
  rows = use_random_sst2(tmp_path, monkeypatch)
  c = cnn_config("arc")
  c.lambda_start = c.lambda_max = 0.5  # the certified objective from the first step
  summary = train_and_evaluate(c, tmp_path / "run")

  assert summary["status"] == "completed" and summary["steps"] == 2
  saved = json.loads((tmp_path / "run" / "config.json").read_text())
  assert saved["model"] == "cnn" and saved["cnn"] == {"filters": 4, "kernel_width": 2}
  model, vocab, space = load_run(tmp_path / "run")
  assert isinstance(model, CNNClassifier)
  assert (model.filters, model.kernel_width) == (4, 2)
  tests = [s.split() for s, _ in rows[:8]]
  result = certify(model, space, tests, [l for _, l in rows[:8]], vocab)
  assert int(np.sum(result["certified"])) == summary["test"]["certified"]

  from arc_jax.evaluation import evaluate_run
  results = evaluate_run(tmp_path / "run", metrics=["acc", "cf", "hf", "ex"], progress=False)
  metrics = results["metrics"]
  assert set(metrics) >= {"acc", "cf", "hf", "ex"}
  assert metrics["cf"]["count"] == summary["test"]["certified"]
  assert metrics["acc"]["count"] == summary["test"]["correct"]
  assert metrics["cf"]["count"] <= metrics["ex"]["count"] <= metrics["hf"]["count"] <= (
      metrics["acc"]["count"])


@pytest.mark.parametrize("method", ["normal", "augment", "hotflip"])
def test_baselines_train_the_cnn(tmp_path, monkeypatch, method):
  use_random_sst2(tmp_path, monkeypatch)
  c = cnn_config(method)
  c.lambda_max = 0.0
  summary = train_and_evaluate(c, tmp_path / "run")
  assert summary["status"] == "completed" and summary["steps"] == 2
  assert 0 <= summary["test"]["certified"] <= summary["test"]["correct"]


def _a3t_cnn():
  spec = importlib.util.spec_from_file_location("a3t_cnn", REPO / "experiments/configs/a3t_cnn.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.parametrize("arg,space", [("del2sub2", "[(Del,2),(Sub,2)]"),
                                       ("sub2ins2", "[(Sub,2),(Ins,2)]")])
def test_a3t_cnn_config_gives_the_table_4_rows(arg, space):
  c = _a3t_cnn().get_config(arg)
  assert (c.model, c.method, c.name) == ("cnn", "a3t", f"a3t_cnn_{arg}")
  assert c.space.replace(" ", "") == space
  assert (c.cnn.filters, c.cnn.kernel_width, c.dropout_rate) == (100, 5, 0.0)
  assert c.augmented.abstracted == "Sub" and c.augmented.augment_search == "hotflip"


def test_a3t_cnn_config_refuses_other_rows():
  from arc_jax.train.config import ConfigError
  with pytest.raises(ConfigError, match="del2sub2"):
    _a3t_cnn().get_config("del2ins2")


@pytest.mark.parametrize("method, abstracted", [("a3t", "Sub"), ("arc_a3t", "Del")])
def test_a3t_and_arc_a3t_train_the_cnn(tmp_path, monkeypatch, method, abstracted):
  """A3T abstracts Sub with the CNN's per-position hulls (its registered interval abstraction),
  ARC-A3T abstracts Del with the CNN's certificate (its certify_model); both train on member
  batches of the sequence family."""
  use_random_sst2(tmp_path, monkeypatch)
  c = cnn_config(method)
  c.augmented.abstracted, c.augmented.augment_members = abstracted, 1
  c.augmented.augment_search = "hotflip" if method == "a3t" else "enumerate"
  c.lambda_start = c.lambda_max = 0.5
  summary = train_and_evaluate(c, tmp_path / "run")
  assert summary["status"] == "completed" and summary["steps"] == 2
  assert 0 <= summary["test"]["certified"] <= summary["test"]["correct"]
