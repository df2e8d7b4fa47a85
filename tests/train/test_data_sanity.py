"""Wrong data and out-of-range settings are refused before a run directory is written: the data
checks of arc_jax.train.experiment.check_data (each threshold named with its override) and the
ranges of arc_jax.train.config.validate, in-process and as a user meets them (train.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.fake_data_root import (cache_dir, data_root, write_data_root,  # noqa: F401
                            write_gzip_lines)

from arc_jax.data import DataFileError
from arc_jax.perturbation import parse_space
from arc_jax.train import ConfigError, default_config
from arc_jax.train.experiment import check_data, rewrite_share
from arc_jax.train.families import FAMILIES

REPO = Path(__file__).resolve().parents[2]
TRAIN = str(REPO / "experiments" / "train.py")
VECTORS = "embeddings/w2v-movies.300d.txt.gz"
PPDB = "synonyms/counterfitting_ppdb2_synonyms.txt.gz"
GARBLED_VECTORS = ["the 0.1 0.2 0.3 0.4", "\x00\x13garbled 3.0 e-1 ,,"]
"""Two lines of a damaged vector file: one word of the vocabulary keeps a vector."""


def garbled_root(tmp_path: Path) -> Path:
  root = write_data_root(tmp_path / "garbled")
  write_gzip_lines(root / VECTORS, GARBLED_VECTORS)
  return root


def empty_synonyms_root(tmp_path: Path) -> Path:
  root = write_data_root(tmp_path / "no_synonyms")
  (root / PPDB).write_bytes(b"")
  return root


@pytest.fixture(autouse=True)
def cached(cache_dir, monkeypatch):  # noqa: F811
  monkeypatch.setenv("ARC_CACHE_DIR", str(cache_dir))


def checked(root, model="lstm", **changes):
  """check_data on the data of the default config (SST-2 or the SST trees) in ``root``."""
  config = default_config()
  config.update(dict(model=model, dataset="sst2" if model == "lstm" else "sst_trees",
                     data_dir=str(root), **changes))
  family = FAMILIES[model]
  check_data(config, family, family.lowering.prepare_data(config))


def test_rewrite_share_counts_sentences_with_a_rewritten_window():
  space = parse_space("[(Del,1),(Trans1,1)]", stopwords=("the",))
  sentences = [("the", "film"), ("it", "is", "good"), ("a", "film"), ()]
  assert [rewrite_share(t, sentences) for t in space.transformations] == [0.25, 0.25]
  assert rewrite_share(space.transformations[0], []) == 0.0


def test_the_fake_data_passes_and_each_threshold_refuses_what_it_measures(data_root):  # noqa: F811
  checked(data_root)
  checked(data_root, "tree_lstm")
  with pytest.raises(DataFileError, match=r"^The vector file \S+/w2v-movies\.300d\.txt\.gz has "
                     r"vectors for 20 of the 26 words of the vocabulary \(76\.923%\), under "
                     r"config\.min_vocab_coverage=0\.8\. It should hold 300-d vectors .*"
                     r"word vectors\); fetch it again, or pass "
                     r"--config\.min_vocab_coverage=0\.0 to train anyway\.$"):
    checked(data_root, min_vocab_coverage=0.8)
  with pytest.raises(DataFileError, match=r"^20\.00% of the sst2 train examples \(1\) have no "
                     r"word with a vector in \S+/w2v-movies\.300d\.txt\.gz, over "
                     r"config\.max_empty_share=0\.1\. Pass --config\.max_empty_share=1\.0 to "
                     r"train anyway\.$"):
    checked(data_root, max_empty_share=0.1)
  with pytest.raises(DataFileError, match=r"^Del of config\.space='\[\(Del,2\),\(Sub,2\)\]' "
                     r"\(words from \S+/stopwords\.txt\) rewrites 80\.000% of the 5 sst2 "
                     r"training examples, under config\.min_transformation_share=0\.9\."):
    checked(data_root, min_transformation_share=0.9)


def test_a_garbled_vector_file_fails_every_check_until_each_is_overridden(tmp_path):
  root = garbled_root(tmp_path)
  with pytest.raises(DataFileError, match=r"vectors for 1 of the 26 words .*\(3\.846%\), under "
                     r"config\.min_vocab_coverage=0\.1"):
    checked(root)
  with pytest.raises(DataFileError, match=r"^80\.00% of the sst2 train examples \(4\) .* over "
                     r"config\.max_empty_share=0\.25"):
    checked(root, min_vocab_coverage=0.0)
  with pytest.raises(DataFileError, match=r"^Sub of .* \(words from \S+/counterfitting_ppdb2_"
                     r"synonyms\.txt\.gz\) rewrites 0\.000% of the 5 sst2 training examples"):
    checked(root, min_vocab_coverage=0.0, max_empty_share=1.0)
  checked(root, min_vocab_coverage=0.0, max_empty_share=1.0,
          min_transformation_share=0.0)


def test_an_empty_lexicon_fails_the_spaces_that_substitute(tmp_path):
  root = empty_synonyms_root(tmp_path)
  for model in ("lstm", "tree_lstm"):
    with pytest.raises(DataFileError, match=r"^Sub of config\.space='\[\(Del,2\),\(Sub,2\)\]' "
                       r"\(words from \S+/no_synonyms/synonyms/counterfitting_ppdb2_synonyms\."
                       r"txt\.gz\) rewrites 0\.000%"):
      checked(root, model)
    checked(root, model, space="[(Del,2),(Ins,2)]")


def test_a_transformation_without_a_data_file_that_never_applies_is_a_config_error(
    data_root):  # noqa: F811
  with pytest.raises(ConfigError, match=r"^Trans3 of config\.space='\[\(Trans3,1\),\(Sub,2\)\]' "
                     r"rewrites 0\.000% of the 5 sst2 training examples, under "
                     r"config\.min_transformation_share=0\.001\. Pass "
                     r"--config\.min_transformation_share=0\.0 to train anyway\.$"):
    checked(data_root, space="[(Trans3,1),(Sub,2)]")


# As a user meets them: one line, status 2, no run directory.

@pytest.fixture
def env(data_root, cache_dir):  # noqa: F811
  return dict(os.environ, ARC_DATA_DIR=str(data_root), ARC_CACHE_DIR=str(cache_dir),
              PYTHONPATH=str(REPO))


def assert_refused(args, env, cwd: Path, message: str):
  """train.py with ``args`` exits 2 with ``message`` as its one error line and writes no run."""
  cwd.mkdir(parents=True, exist_ok=True)
  done = subprocess.run([sys.executable, TRAIN, "--config=normal.py", "--config.num_epochs=1",
                         "--config.hidden=4", "--config.lstm.projection=4", "--config.lstm.head_hidden=4",
                         "--workdir=run", *args], cwd=cwd, env=env, capture_output=True,
                        text=True, timeout=300, check=False)
  errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
  assert done.returncode == 2, done.stderr[-3000:]
  assert "Traceback" not in done.stderr and len(errors) == 1, done.stderr[-3000:]
  assert done.stderr.rstrip().endswith(errors[0]) and re.match(message, errors[0]), errors[0]
  assert not (cwd / "run").exists() and not (cwd / "runs").exists()


def test_train_refuses_a_garbled_vector_file(tmp_path, env):
  assert_refused([], dict(env, ARC_DATA_DIR=str(garbled_root(tmp_path))), tmp_path / "work",
                 r"error: The vector file \S+/garbled/embeddings/w2v-movies\.300d\.txt\.gz has "
                 r"vectors for 1 of the 26 words .* pass --config\.min_vocab_coverage=0\.0 to "
                 r"train anyway\.$")


def test_train_refuses_an_empty_synonym_file(tmp_path, env):
  assert_refused([], dict(env, ARC_DATA_DIR=str(empty_synonyms_root(tmp_path))),
                 tmp_path / "work",
                 r"error: Sub of config\.space='\[\(Del,2\),\(Sub,2\)\]' \(words from \S+/"
                 r"no_synonyms/synonyms/counterfitting_ppdb2_synonyms\.txt\.gz\) rewrites "
                 r"0\.000% .* Pass --config\.min_transformation_share=0\.0 to train anyway\.$")


@pytest.mark.parametrize("override, message", [
    ("dropout_rate=2", r"config\.dropout_rate=2\.0 must be in \[0, 1\)\.$"),
    ("learning_rate=-1", r"config\.learning_rate=-1\.0 must be > 0\.$"),
    ("space=[]", r"config\.space='\[\]' has no transformation; list at least one"),
    ("space=[(Sub,0)]", r"config\.space='\[\(Sub,0\)\]': Sub has budget 0 and never applies"),
])
def test_train_refuses_an_out_of_range_setting(tmp_path, env, override, message):
  assert_refused([f"--config.{override}"], env, tmp_path, "error: " + message)
