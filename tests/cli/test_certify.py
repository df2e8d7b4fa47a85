"""``arc-certify`` on a kept model with no data folder: one JSON line per sentence, tokenised as
the training data, certificates that enumeration of S(x) confirms, one-line user errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from flax import nnx

import arc_jax
from arc_jax.cli import certify as cli
from arc_jax.nn.models import predict

REPO = Path(__file__).resolve().parents[2]
KEPT = REPO / "results" / "arc_lstm_del2sub2"
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
