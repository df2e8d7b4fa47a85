"""The data folder, missing and damaged-file errors, cache folder and fingerprints."""

import gzip
import os
from pathlib import Path

import pytest

from arc_jax.data import load_stopwords, load_synonyms, paths, read_vectors


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


def test_the_documented_order_and_nothing_else(tmp_path, monkeypatch):
  """config.data_dir, $ARC_DATA_DIR, ./data, the mirror, the public sources: each named folder
  is the only one, and a folder beside the checkout (../shared/data) is never looked at."""
  monkeypatch.delenv("ARC_DATA_DIR", raising=False)
  monkeypatch.delenv("ARC_DATA_MIRROR", raising=False)
  monkeypatch.setenv("ARC_CACHE_DIR", str(tmp_path / "cache"))
  work = tmp_path / "repo"
  work.mkdir()
  monkeypatch.chdir(work)
  _touch(tmp_path / "shared" / "data" / "stopwords.txt")
  public = paths.resolve()
  assert (public.source, public.path) == ("public sources", tmp_path / "cache/data/public")
  monkeypatch.setenv("ARC_DATA_MIRROR", "http://mirror.example/base/")
  mirror = paths.resolve()
  assert (mirror.source, mirror.mirror) == ("$ARC_DATA_MIRROR", "http://mirror.example/base")
  assert mirror.path == tmp_path / "cache/data/mirror" and mirror.downloads
  _touch(work / "data" / "stopwords.txt")
  assert paths.resolve().source == "./data"
  assert paths.find_data_file("stopwords.txt") == (work / "data/stopwords.txt").resolve()
  monkeypatch.setenv("ARC_DATA_DIR", str(_touch(tmp_path / "env" / "x").parent))
  assert paths.resolve() == paths.DataFolder((tmp_path / "env").resolve(), "$ARC_DATA_DIR")
  assert paths.resolve(tmp_path / "shared").source == "config.data_dir"


def test_env_var_folder_is_the_only_one(tmp_path, monkeypatch):
  _touch(tmp_path / "cwd" / "data" / "stopwords.txt")
  (tmp_path / "env").mkdir()
  monkeypatch.chdir(tmp_path / "cwd")
  monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path / "env"))
  assert paths.data_folder() == (tmp_path / "env").resolve()
  with pytest.raises(paths.DataFileNotFoundError, match=f"stopwords.txt not found in the data "
                     f"folder {tmp_path / 'env'}"):
    paths.find_data_file("stopwords.txt")
  monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path / "nowhere"))
  with pytest.raises(paths.DataFileNotFoundError, match=r"nowhere \(from \$ARC_DATA_DIR\) does "
                     "not exist"):
    paths.data_folder()


def test_files_are_never_mixed_from_two_folders(tmp_path, monkeypatch):
  monkeypatch.delenv("ARC_DATA_DIR", raising=False)
  monkeypatch.setenv("ARC_DATA_MIRROR", "http://127.0.0.1:9/")  # never asked: ./data is named
  monkeypatch.chdir(_touch(tmp_path / "repo" / "data" / "a.txt").parents[1])
  _touch(tmp_path / "shared" / "data" / "b.txt")
  assert paths.data_folder() == (tmp_path / "repo" / "data").resolve()
  with pytest.raises(paths.DataFileNotFoundError, match="b.txt not found"):
    paths.find_data_file("b.txt")


def _damage(path: Path, kind: str) -> Path:
  data = path.read_bytes()
  # "corrupt": an unknown compression method in the header (byte 2). Dropping two header bytes,
  # as before, shifted the gzip mtime into the header, so whether it failed depended on the clock.
  path.write_bytes(data[:len(data) // 2] if kind == "truncated" else data[:2] + b"\x00" + data[3:])
  return path


@pytest.mark.parametrize("kind", ["truncated", "corrupt"])
def test_damaged_files_name_the_file_and_its_source(tmp_path, kind):
  with gzip.open(tmp_path / "v.txt.gz", "wt") as f:
    f.write("".join(f"w{i} 1 2 3\n" for i in range(2000)))
  with pytest.raises(paths.DataFileError, match=r"v\.txt\.gz is truncated or corrupt \(\w+"):
    read_vectors(_damage(tmp_path / "v.txt.gz", kind), ["w1"])
  synonyms = tmp_path / "synonyms" / "counterfitting_ppdb2_synonyms.txt.gz"
  synonyms.parent.mkdir()
  with gzip.open(synonyms, "wt") as f:
    f.write("".join(f"a{i} b{i}\n" for i in range(3000)))
  with pytest.raises(paths.DataFileError, match="counterfitting_ppdb2.*counter-fitting"):
    load_synonyms("ppdb", data_root=_damage(synonyms, kind).parents[1])
  (tmp_path / "stopwords.txt").write_bytes(b"\xff\xfe")
  with pytest.raises(paths.DataFileError, match="stopwords.txt .*UnicodeDecodeError.*stop words"):
    load_stopwords(tmp_path)


def test_missing_file_error_names_file_folders_and_source(tmp_path):
  with pytest.raises(paths.DataFileNotFoundError) as error:
    paths.find_data_file("sst2/test.txt", tmp_path)
  message = str(error.value)
  assert "sst2/test.txt" in message
  assert str(tmp_path.resolve()) in message
  assert "A3T" in message and "docs/DATA.md" in message
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
