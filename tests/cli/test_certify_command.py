"""``arc-certify`` on a kept model with no data folder: one JSON line per sentence, tokenised as
the training data, certificates that enumeration of S(x) confirms, one-line user errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import chex
import jax
import numpy as np
import pytest
from flax import nnx

import arc_jax
from arc_jax.cli import certify as cli
from arc_jax.nn.models import predict

REPO = Path(__file__).resolve().parents[2]
KEPT = REPO / "results" / "arc_lstm_del2sub2"
requires_real_data = pytest.mark.skipif(not (Path(os.environ["ARC_DATA_DIR"]) / "sst2").is_dir(),
                                        reason="real data not found ($ARC_DATA_DIR)")
SENTENCES = ["A charming and often affecting journey .", "",
             "the movie -LRB- a film -RRB- is bad , and the acting is worse",
             "zyzzyvas qwxzqj", "this film is a total waste of time"]


def _no_data(tmp_path, monkeypatch):
  monkeypatch.delenv("ARC_DATA_DIR", raising=False)
  monkeypatch.setenv("ARC_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.setenv("ARC_DATA_MIRROR", "http://127.0.0.1:9")  # a download would fail loudly
  monkeypatch.chdir(tmp_path)


def test_sentences_are_certified_as_enumeration_confirms(tmp_path, monkeypatch):
  _no_data(tmp_path, monkeypatch)
  (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n")
  assert cli.main(["--model", str(KEPT), "--space", "[(Del,1),(Sub,1)]", "--output",
                   str(tmp_path / "out.jsonl"), str(tmp_path / "in.txt")]) == 0
  rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
  assert [r["line"] for r in rows] == [1, 3, 4, 5]  # the blank line is skipped
  # Tokenised as SST-2: lower-cased, PTB escapes undone; words without a vector listed.
  assert rows[1]["tokens"][:4] == ["the", "movie", "(", "a"]
  assert rows[2]["tokens"] == [] and rows[2]["dropped"] == ["zyzzyvas", "qwxzqj"]
  model, vocab, space = arc_jax.load_run(KEPT, space="[(Del,1),(Sub,1)]")
  graphdef, state = nnx.split(model)
  for row in rows:
    members = list(space.enumerate(row["tokens"]))
    assert row["space_size"] >= len(members)
    width = max(1, max(len(m) for m in members))
    ids = np.array([[vocab[w] for w in m] + [0] * (width - len(m)) for m in members], np.int32)
    labels = np.argmax(np.asarray(predict(graphdef, state, ids, np.array(
        [len(m) for m in members], np.int32))), axis=-1)
    assert row["prediction"] == labels[0] == row["label"]  # members[0] is x itself
    assert row["certified"] == (row["margin"] > 0)
    if row["certified"]:
      assert (labels == row["label"]).all(), row


def test_predictions_are_certified_on_one_compiled_program(tmp_path, monkeypatch):
  """Sentences of both predictions, certified for their own predictions, trace the DP once: the
  second pass (for the sentences not predicted 0) runs the first pass's batches. (Certifying the
  short positive sentence alone again, as before, padded it to a narrower width: a second
  program.)"""
  from arc_jax.certify import api  # pylint: disable=import-outside-toplevel
  _no_data(tmp_path, monkeypatch)
  (tmp_path / "in.txt").write_text("a charming and often affecting journey .\n"
                                   "the movie is bad , and the acting is worse , and the plot is "
                                   "a total waste of time\n")
  jax.clear_caches()
  chex.clear_trace_counter()
  monkeypatch.setattr(api, "certify_model", chex.assert_max_traces(api.certify_model, n=1))
  assert cli.main(["--model", str(KEPT), "--output", str(tmp_path / "out.jsonl"),
                   str(tmp_path / "in.txt")]) == 0
  rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
  assert sorted(r["prediction"] for r in rows) == [0, 1]
  assert all(r["label"] == r["prediction"] for r in rows)


def test_labelled_lines_and_user_errors_are_one_line(tmp_path, monkeypatch, capsys):
  _no_data(tmp_path, monkeypatch)
  (tmp_path / "in.txt").write_text("0\ta charming and often affecting journey .\n")
  assert cli.main(["--model", str(KEPT), "--labelled", "--output", str(tmp_path / "o.jsonl"),
                   str(tmp_path / "in.txt")]) == 0
  row = json.loads((tmp_path / "o.jsonl").read_text())
  assert (row["label"], row["prediction"], row["certified"]) == (0, 1, False)
  assert row["margin"] < 0
  (tmp_path / "bad.txt").write_text("no label here\n")
  assert cli.main(["--model", str(KEPT), "--labelled", str(tmp_path / "bad.txt")]) == 2
  assert "line 1: expected '<label><TAB><text>'" in capsys.readouterr().err
  assert cli.main(["--model", str(tmp_path / "nowhere"), str(tmp_path / "in.txt")]) == 2
  assert "not a run directory" in capsys.readouterr().err


def test_the_console_script_reads_standard_input(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != "ARC_DATA_DIR"}
  done = subprocess.run([sys.executable, "-m", "arc_jax.cli.certify", "--model", str(KEPT), "-"],
                        input="a good film\n", capture_output=True, text=True, cwd=tmp_path,
                        env=dict(env, ARC_CACHE_DIR=str(tmp_path / "cache")), timeout=300,
                        check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  row = json.loads(done.stdout)
  assert row["tokens"] == ["a", "good", "film"] and row["space_size"] > 1


def test_attack_and_exact_answers_are_members_that_flip_the_prediction(tmp_path, monkeypatch):
  _no_data(tmp_path, monkeypatch)
  model_dir = REPO / "results" / "normal_lstm"  # certifies little: HotFlip finds flips
  (tmp_path / "in.txt").write_text("the movie is bad\na charming and often affecting journey .\n"
                                   "a bad , bad film\n")
  assert cli.main(["--model", str(model_dir), "--attack", "--exact", "--output",
                   str(tmp_path / "out.jsonl"), str(tmp_path / "in.txt")]) == 0
  rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
  model, vocab, space = arc_jax.load_run(model_dir)
  graphdef, state = nnx.split(model)

  def predicted(tokens):
    ids = np.array([[vocab[w] for w in tokens] or [0]], np.int32)
    return int(np.argmax(predict(graphdef, state, ids, np.array([len(tokens)], np.int32))))

  assert any(r["counterexample"] for r in rows) and {r["exact"] for r in rows} <= {
      "robust", "not robust", "unknown"}
  for row in rows:
    members = set(space.enumerate(row["tokens"]))
    for found in (row["counterexample"], row["exact_counterexample"]):
      if found is not None:
        assert tuple(found) in members and predicted(found) != row["label"], row
    assert row["certified"] <= (row["exact"] == "robust")
    assert (row["exact"] == "not robust") == (row["exact_counterexample"] is not None)
    assert row["counterexample"] is None or row["exact"] == "not robust"


def test_exact_is_refused_for_trees_in_one_line(tmp_path, monkeypatch, capsys):
  _no_data(tmp_path, monkeypatch)
  (tmp_path / "in.txt").write_text("(3 (2 a) (3 (3 good) (2 film)))\n")
  assert cli.main(["--model", str(REPO / "results" / "arc_tree_del2sub2"), "--exact",
                   str(tmp_path / "in.txt")]) == 2
  assert "--exact supports LSTM and Bi-LSTM models" in capsys.readouterr().err


def _agrees_with_evaluate(tmp_path, first):
  """arc-certify --labelled on the SST-2 test sentences as the model sees them certifies
  exactly the sentences that evaluate.py's CF certifies."""
  from arc_jax import metrics  # pylint: disable=import-outside-toplevel
  from arc_jax.evaluation import restore_run  # pylint: disable=import-outside-toplevel
  params, _, experiment = restore_run(KEPT, num_test=first)
  cf = metrics.certified(metrics.Context(experiment, params, "test", {}, progress=False)).robust
  tokens, labels = experiment.examples("test")
  (tmp_path / "test.txt").write_text("".join(f"{y}\t{' '.join(t)}\n"
                                             for t, y in zip(tokens, labels)))
  assert cli.main(["--model", str(KEPT), "--labelled", "--output", str(tmp_path / "out.jsonl"),
                   str(tmp_path / "test.txt")]) == 0
  rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
  assert [tuple(r["tokens"]) for r in rows] == [tuple(t) for t in tokens]
  assert np.array_equal([r["certified"] for r in rows], cf), np.flatnonzero(
      np.array([r["certified"] for r in rows]) != cf)
  return int(cf.sum())


@requires_real_data
def test_certificates_agree_with_evaluate_cf_on_the_first_test_sentences(tmp_path):
  assert _agrees_with_evaluate(tmp_path, 200) > 100


@requires_real_data
@pytest.mark.slow
def test_certificates_agree_with_evaluate_cf_on_the_whole_test_set(tmp_path):
  assert _agrees_with_evaluate(tmp_path, None) > 1000
