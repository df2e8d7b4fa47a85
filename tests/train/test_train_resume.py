"""An interrupted run resumes to exactly the parameters, metrics and summary of a whole run.

Tiny data (a fake data root with short sentences, so one length bucket, and the same sentences
as small SST-style trees), a tiny model (LSTM, and Tree-LSTM), data augmentation (so the
per-step sampling seeds are exercised too) and dropout. The run is stopped twice: by
``max_steps`` (a clean stop that saves a checkpoint) and by an exception raised inside the loop
one step after a periodic checkpoint (a crash that loses a step).
"""

import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import orbax.checkpoint as ocp
import pytest

from tests.helpers.fake_data_root import write_data_root, write_gzip_lines

from arc_jax.train import METHODS, Method, default_config, register_method, train_and_evaluate
from arc_jax.train.methods import random_members

POSITIVE, NEGATIVE = ("good", "great", "fine"), ("bad", "terrible", "bleak")
FILLER = ("the", "film", "movie", "a", "and", "is", "it", "'s", "journey")
CRASH = {"at": None}


class Crash(Exception):
  """Stands for a killed process."""


def crashing_augmentation(experiment):
  augment = random_members(experiment)

  def transform(batch, step, params):
    if step == CRASH["at"]:
      raise Crash(step)
    return augment(batch, step, params)

  return transform


if "augment_crash_test" not in METHODS:
  register_method("augment_crash_test", Method(batch_transform=crashing_augmentation))


def sentences(rng, n):
  rows = []
  for _ in range(n):
    label = int(rng.integers(2))
    words = list(rng.choice(FILLER, size=rng.integers(1, 7))) + [rng.choice(
        POSITIVE if label else NEGATIVE)]
    rng.shuffle(words)
    rows.append((" ".join(words), label))
  return rows


def bracketed_tree(rng, sentence):
  """The sentence as a random binary SST tree; a node is labelled 4 (0) if its subtree holds a
  positive (negative) word, else 2."""
  nodes = sentence.split()
  while len(nodes) > 1:
    i = int(rng.integers(len(nodes) - 1))
    nodes[i:i + 2] = [(nodes[i], nodes[i + 1])]

  def leaves(node):
    return {node} if isinstance(node, str) else leaves(node[0]) | leaves(node[1])

  def text(node):
    words = leaves(node)
    label = 4 if words & set(POSITIVE) else 0 if words & set(NEGATIVE) else 2
    if isinstance(node, str):
      return f"({label} {node})"
    return f"({label} {text(node[0])} {text(node[1])})"

  return text(nodes[0])


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
  """A fake data root whose SST-2 has 48 / 8 / 8 short sentences, and the SST trees the same
  sentences as small trees; its own cache."""
  root = write_data_root(tmp_path_factory.mktemp("tiny_root"))
  rng = np.random.default_rng(0)
  tsv = lambda rows: ["sentence\tlabel"] + [f"{s} \t{l}" for s, l in rows]
  splits = {"train": sentences(rng, 48), "dev": sentences(rng, 8), "test": sentences(rng, 8)}
  write_gzip_lines(root / "sst2" / "train.tsv.gz", tsv(splits["train"]))
  write_gzip_lines(root / "sst2" / "dev.tsv.gz", tsv(splits["dev"]))
  (root / "sst2" / "test.txt").write_text("\n".join(f"{l} {s}" for s, l in splits["test"]))
  for name, rows in splits.items():
    write_gzip_lines(root / "sst" / f"{name}.txt.gz", [bracketed_tree(rng, s) for s, _ in rows])
  return root, tmp_path_factory.mktemp("tiny_cache")


def tiny_config(model):
  c = default_config()
  c.name = "resume_test"
  c.method = "augment_crash_test"
  c.model = model
  if model == "tree_lstm":
    c.dataset, c.optimizer = "sst_trees", "adagrad"
    c.tree_lstm.trainable_embeddings = True  # the embedding parameter group resumes too
  c.space = "[(Del,1),(Sub,1)]"
  c.hidden, c.lstm.projection, c.lstm.head_hidden = 6, 5, 4
  c.batch_size = c.eval_batch_size = 8  # 6 steps per epoch
  c.num_epochs = 2
  c.log_every = 2
  c.checkpoint_every = 3  # mid-epoch checkpoints at steps 3 and 9
  c.progress = False
  return c


def without_timings(record):
  return {k: without_timings(v) if isinstance(v, dict) else v for k, v in record.items()
          if "seconds" not in k and k != "steps_per_s"}


def final_state(workdir: Path):
  step = max(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  return step, ocp.PyTreeCheckpointer().restore(workdir / "checkpoints" / str(step) / "state")


@pytest.mark.filterwarnings("ignore:Sharding info not provided")  # raw restores in final_state
@pytest.mark.parametrize("model", ["lstm", "tree_lstm"])
def test_interrupted_runs_resume_to_the_uninterrupted_result(tiny_data, tmp_path, monkeypatch,
                                                             model):
  root, cache = tiny_data
  monkeypatch.setenv("ARC_DATA_DIR", str(root))
  monkeypatch.setenv("ARC_CACHE_DIR", str(cache))
  reference = train_and_evaluate(tiny_config(model), tmp_path / "reference")
  assert reference["status"] == "completed" and reference["steps"] == 12

  stopping = tiny_config(model)
  stopping.max_steps = 4
  assert train_and_evaluate(stopping, tmp_path / "run") == {
      "status": "stopped", "step": 4, "workdir": str(tmp_path / "run")}
  CRASH["at"] = 10
  try:
    with pytest.raises(Crash):
      train_and_evaluate(tiny_config(model), tmp_path / "run")
  finally:
    CRASH["at"] = None
  assert final_state(tmp_path / "run")[0] == 9
  resumed = train_and_evaluate(tiny_config(model), tmp_path / "run")

  assert without_timings(resumed) == without_timings(reference)
  logs = [[without_timings(json.loads(l)) for l in (d / "metrics.jsonl").read_text().splitlines()]
          for d in (tmp_path / "reference", tmp_path / "run")]
  assert logs[0] == logs[1]
  assert [r["step"] for r in logs[0] if r["kind"] == "train"] == [2, 4, 6, 8, 10, 12]
  (step_a, state_a), (step_b, state_b) = (final_state(tmp_path / d) for d in ("reference", "run"))
  assert step_a == step_b == 12
  flat_a, flat_b = (ocp.tree.to_flat_dict(s) for s in (state_a, state_b))
  assert flat_a.keys() == flat_b.keys()
  for key in flat_a:
    np.testing.assert_array_equal(flat_a[key], flat_b[key], err_msg=str(key))


SIGNAL = {"at": None}


def signalling_augmentation(experiment):
  augment = random_members(experiment)

  def transform(batch, step, params):
    if step == SIGNAL["at"]:
      os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: the step runs, then the loop stops
    return augment(batch, step, params)

  return transform


if "augment_signal_test" not in METHODS:
  register_method("augment_signal_test", Method(batch_transform=signalling_augmentation))


@pytest.mark.filterwarnings("ignore:Sharding info not provided")  # raw restores in final_state
def test_a_signal_mid_epoch_or_during_the_dev_evaluation_resumes_to_the_same_result(
    tiny_data, tmp_path, monkeypatch):
  root, cache = tiny_data
  monkeypatch.setenv("ARC_DATA_DIR", str(root))
  monkeypatch.setenv("ARC_CACHE_DIR", str(cache))
  config = tiny_config("lstm")
  config.method = "augment_signal_test"
  reference = train_and_evaluate(config, tmp_path / "reference")
  handler = signal.getsignal(signal.SIGINT)
  # Signalled before step 4 runs: stops after it, mid-epoch. Before step 12, the last of epoch 1:
  # stops during epoch 1's dev evaluation, which the resumed run does first.
  for at, stopped in ((3, 4), (11, 12)):
    SIGNAL["at"] = at
    try:
      out = train_and_evaluate(config, tmp_path / "run")
    finally:
      SIGNAL["at"] = None
    assert out == {"status": "interrupted", "step": stopped, "workdir": str(tmp_path / "run"),
                   "signal": "SIGINT"}
    assert final_state(tmp_path / "run")[0] == stopped
  assert signal.getsignal(signal.SIGINT) is handler  # restored
  assert without_timings(train_and_evaluate(config, tmp_path / "run")) == without_timings(
      reference)
  logs = [[without_timings(json.loads(l)) for l in (d / "metrics.jsonl").read_text().splitlines()]
          for d in (tmp_path / "reference", tmp_path / "run")]
  assert logs[0] == logs[1]
