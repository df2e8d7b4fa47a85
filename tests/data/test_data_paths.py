"""Data-root search, missing-file errors, cache folder and fingerprints."""

import os
from pathlib import Path

import pytest

from arc_jax.data import paths


def _touch(path: Path) -> Path:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("x")
  return path


def test_env_var_root_comes_first(tmp_path, monkeypatch):
  _touch(tmp_path / "env" / "stopwords.txt")
  _touch(tmp_path / "cwd" / "data" / "stopwords.txt")
  monkeypatch.chdir(tmp_path / "cwd")
  monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path / "env"))
  assert paths.find_data_file("stopwords.txt") == (tmp_path / "env" / "stopwords.txt").resolve()


def test_cwd_data_then_shared_data(tmp_path, monkeypatch):
  monkeypatch.delenv("ARC_DATA_DIR", raising=False)
  work = tmp_path / "repo"
  work.mkdir()
  monkeypatch.chdir(work)
  _touch(tmp_path / "shared" / "data" / "a3t" / "en.key")
  assert paths.find_data_file("a3t/en.key") == (tmp_path / "shared/data/a3t/en.key").resolve()
  _touch(work / "data" / "a3t" / "en.key")
  assert paths.find_data_file("a3t/en.key") == (work / "data/a3t/en.key").resolve()


def test_roots_are_listed_once(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv("ARC_DATA_DIR", "data")
  roots = [r.resolve() for r in paths.data_roots()]
  assert roots[0] == (tmp_path / "data").resolve()
  assert len(roots) == len(set(roots))


def test_missing_file_error_names_file_folders_and_source(tmp_path):
  with pytest.raises(paths.DataFileNotFoundError) as error:
    paths.find_data_file("sst2/test.txt", tmp_path)
  message = str(error.value)
  assert "sst2/test.txt" in message
  assert str(tmp_path.resolve()) in message
  assert "A3T" in message and "PROVENANCE.md" in message
  assert isinstance(error.value, FileNotFoundError)


def test_dataset_dir_needs_every_file(tmp_path):
  _touch(tmp_path / "sst" / "train.txt.gz")
  with pytest.raises(paths.DataFileNotFoundError, match=r"sst/dev\.txt\.gz.*SST"):
    paths.find_dataset_dir("sst", ["train.txt.gz", "dev.txt.gz"], tmp_path)
  _touch(tmp_path / "sst" / "dev.txt.gz")
  assert paths.find_dataset_dir("sst", ["train.txt.gz", "dev.txt.gz"], tmp_path) == (
      tmp_path / "sst").resolve()


def test_cache_dir_default_and_env(tmp_path, monkeypatch):
  monkeypatch.setenv("ARC_CACHE_DIR", str(tmp_path / "c"))
  assert paths.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()
  assert paths.cache_dir(tmp_path / "explicit") == tmp_path / "explicit"
  monkeypatch.delenv("ARC_CACHE_DIR")
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  assert paths.cache_dir() == tmp_path / "home" / ".cache" / "arc_jax"


def test_fingerprint_follows_content_and_extra(tmp_path):
  f = _touch(tmp_path / "f.txt")
  first = paths.file_fingerprint([f], "v1")
  assert paths.file_fingerprint([f], "v1") == first
  assert paths.file_fingerprint([f], "v2") != first
  f.write_text("longer")
  os.utime(f, ns=(1, 1))
  assert paths.file_fingerprint([f], "v1") != first
