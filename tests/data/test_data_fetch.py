"""Data fetched into a download folder: from a mirror (served here by a local HTTP server) or from
the public sources (their registered checksums, and conversions, checked against the real data).

Every download is verified; a refused or interrupted one leaves nothing in the cache.
"""

import contextlib
import functools
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from arc_jax.data import fetch, load_stopwords, load_synonyms, paths, prepare_lstm_data
from tests.helpers.fake_data_root import IMDB_TEST, IMDB_TRAIN, write_data_root

REAL = Path(os.environ["ARC_DATA_DIR"])
requires_real_data = pytest.mark.skipif(not (REAL / "sst2").is_dir(),
                                        reason=f"real data not found in {REAL}")


class _Handler(http.server.SimpleHTTPRequestHandler):
  """Serves a folder; a path in ``cut`` is sent half-way once, then the connection drops."""

  cut: set = set()

  def log_message(self, *args):
    pass

  def do_GET(self):  # pylint: disable=invalid-name
    relative = self.path.lstrip("/")
    if relative in self.cut:
      self.cut.discard(relative)
      data = (Path(self.directory) / relative).read_bytes()
      self.send_response(200)
      self.send_header("Content-Length", str(len(data)))
      self.end_headers()
      self.wfile.write(data[:len(data) // 2])
      self.close_connection = True
      return
    super().do_GET()


@contextlib.contextmanager
def serving(folder: Path, cut=()):
  """A local HTTP server of ``folder``; yields its base URL."""
  handler = type("Handler", (_Handler,), {"cut": set(cut)})
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                           functools.partial(handler, directory=str(folder)))
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{server.server_port}"
  finally:
    server.shutdown()
    server.server_close()


def _sha256(path: Path) -> str:
  return hashlib.sha256(path.read_bytes()).hexdigest()


def _table(rows) -> str:
  return "".join(f"{key}\t{size}\t{sha}\n" for key, size, sha in rows)


def _layout_of(root: Path) -> list[tuple[str, int, str]]:
  return [(p.relative_to(root).as_posix(), p.stat().st_size, _sha256(p))
          for p in sorted(root.rglob("*")) if p.is_file()]


@pytest.fixture
def mirror_env(tmp_path, monkeypatch):
  """No data folder anywhere: an empty working directory and cache, no $ARC_DATA_DIR; the fake
  data folder's layout registered as the one mirrors serve. Yields (served folder, cache)."""
  served = write_data_root(tmp_path / "served")
  layout = tmp_path / "layout.tsv"
  layout.write_text(_table(_layout_of(served)))
  monkeypatch.setattr(fetch, "LAYOUT_FILE", layout)
  monkeypatch.delenv("ARC_DATA_DIR", raising=False)
  monkeypatch.setenv("ARC_CACHE_DIR", str(tmp_path / "cache"))
  (tmp_path / "work").mkdir()
  monkeypatch.chdir(tmp_path / "work")
  return served, tmp_path / "cache"


def _leftovers(cache: Path) -> list[str]:
  """Anything in the download folder but whole files and their locks."""
  folder = cache / "data" / "mirror"
  return sorted(p.name for p in folder.rglob("*")
                if p.name.startswith(".download") or p.name.endswith(".tmp"))


def test_a_mirror_is_downloaded_verified_and_cached(mirror_env, monkeypatch):
  served, cache = mirror_env
  with serving(served) as url:
    monkeypatch.setenv("ARC_DATA_MIRROR", url + "/")
    assert paths.resolve().source == "$ARC_DATA_MIRROR"
    data = prepare_lstm_data("sst2", synonyms="ppdb", max_candidates=1, cache_dir=cache)
  folder = cache / "data" / "mirror"
  for name in ("sst2/train.tsv.gz", "sst2/dev.tsv.gz", "sst2/test.txt", "stopwords.txt",
               "synonyms/counterfitting_ppdb2_synonyms.txt.gz",
               "embeddings/w2v-movies.300d.txt.gz"):
    assert (folder / name).read_bytes() == (served / name).read_bytes(), name
  assert not _leftovers(cache)
  # The server is gone: the download folder serves what it holds.
  again = prepare_lstm_data("sst2", synonyms="ppdb", max_candidates=1, cache_dir=cache)
  assert again.vocab == data.vocab and len(again.splits["train"]) == 5


def test_a_changed_file_is_refused_in_one_line_and_nothing_is_kept(mirror_env, monkeypatch):
  served, cache = mirror_env
  want = _sha256(served / "stopwords.txt")
  (served / "stopwords.txt").write_text("a\nthe\n")
  with serving(served) as url:
    monkeypatch.setenv("ARC_DATA_MIRROR", url)
    with pytest.raises(paths.DataFileError) as refused:
      load_stopwords()
  message = str(refused.value)
  assert "\n" not in message and "stopwords.txt" in message
  assert _sha256(served / "stopwords.txt") in message and want in message
  assert not (cache / "data" / "mirror" / "stopwords.txt").exists()
  assert not _leftovers(cache)


def test_an_interrupted_download_leaves_nothing_and_restarts(mirror_env, monkeypatch):
  served, cache = mirror_env
  name = "synonyms/counterfitting_ppdb2_synonyms.txt.gz"
  with serving(served, cut=[name]) as url:
    monkeypatch.setenv("ARC_DATA_MIRROR", url)
    with pytest.raises(paths.DataFileNotFoundError, match="Could not download .*nothing was "
                       "kept. Run again to restart it"):
      load_synonyms("ppdb")
    assert not (cache / "data" / "mirror" / name).exists() and not _leftovers(cache)
    assert load_synonyms("ppdb")["good"] == ("great", "fine")
  assert (cache / "data" / "mirror" / name).read_bytes() == (served / name).read_bytes()


def test_a_mirror_without_the_file_names_it_and_the_ways_out(mirror_env, monkeypatch, tmp_path):
  (tmp_path / "empty").mkdir()
  with serving(tmp_path / "empty") as url:
    monkeypatch.setenv("ARC_DATA_MIRROR", url)
    with pytest.raises(paths.DataFileNotFoundError) as failed:
      load_stopwords()
  assert "stopwords.txt" in str(failed.value) and "404" in str(failed.value)
  assert "$ARC_DATA_DIR" in str(failed.value) and not _leftovers(mirror_env[1])


@requires_real_data
def test_the_registered_layout_is_the_real_data_folder():
  layout = fetch.layout()
  assert {path: (int(info.size), info.checksum) for path, info in layout.items()} == {
      path: (size, sha) for path, size, sha in _layout_of(REAL) if path in layout}
  assert set(fetch.SOURCE_OF) | {"embeddings/w2v-movies.300d.txt.gz"} >= set(layout)


def _originals(real: Path) -> dict[str, bytes]:
  """The public sources' files, rebuilt from the real data folder (each a byte-exact copy or a
  gzip of one; RNTN's train.txt also holds the dev trees)."""
  unzip = lambda name: gzip.decompress((real / name).read_bytes())
  return {
      "train_full.tsv": unzip("sst2/train.tsv.gz"), "dev.tsv": unzip("sst2/dev.tsv.gz"),
      "sst2test.txt": (real / "sst2/test.txt").read_bytes(),
      "train.txt": unzip("sst/train.txt.gz") + unzip("sst/dev.txt.gz"),
      "dev.txt": unzip("sst/dev.txt.gz"), "test.txt": unzip("sst/test.txt.gz"),
      **{f"imdb_{s}_files.txt": (real / f"imdb/imdb_{s}_files.txt").read_bytes()
         for s in ("train", "dev", "test")},
      "counterfitted_neighbors.json": unzip("synonyms/counterfitted_neighbors.json.gz"),
      "ppdb_synonyms.txt": unzip("synonyms/counterfitting_ppdb2_synonyms.txt.gz"),
  }


@requires_real_data
def test_public_sources_are_registered_and_prepare_the_data_folder(tmp_path, monkeypatch):
  """Each GitHub source rebuilt from the real data matches its registered size and sha256 (the
  registration is right), and preparing it gives the real file's content."""
  registered = fetch.registered_checksums()
  originals = _originals(REAL)
  served = tmp_path / "served"
  served.mkdir()
  local_table = []
  for url, info in registered.items():
    if "githubusercontent" not in url:
      continue
    data = originals[info.filename]
    assert (len(data), hashlib.sha256(data).hexdigest()) == (int(info.size), info.checksum), url
    (served / info.filename).write_bytes(data)
  with serving(served) as base:
    for url, info in registered.items():
      local_table.append((f"{base}/{info.filename}", int(info.size), info.checksum))
    table = tmp_path / "checksums.tsv"
    table.write_text(_table(local_table))
    monkeypatch.setattr(fetch, "CHECKSUMS_FILE", table)
    local = {out: fetch.Source(f"{base}/{registered[s.url].filename}", s.outputs, s.prepare)
             for out, s in fetch.SOURCE_OF.items() if s.url and s.url in registered
             and "githubusercontent" in s.url}
    monkeypatch.setattr(fetch, "SOURCE_OF", {**fetch.SOURCE_OF, **local})
    folder = tmp_path / "public"
    for output in [*local, "stopwords.txt"]:
      made = fetch.fetch(output, folder, None)
      read = lambda p: gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
      assert read(made) == read(REAL / output), output


def test_imdb_archive_becomes_the_json_lines_layout(tmp_path):
  archive = tmp_path / "aclImdb_v1.tar.gz"
  with tarfile.open(archive, "w:gz") as tar:
    for split, rows in (("train", IMDB_TRAIN), ("test", IMDB_TEST)):
      for row in reversed(rows):  # archive order is not the layout's
        data = row["text"].encode("utf-8")
        member = tarfile.TarInfo(f"aclImdb/{split}/{row['file']}")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    readme = tarfile.TarInfo("aclImdb/README")
    tar.addfile(readme, io.BytesIO(b""))
  (tmp_path / "out" / "imdb").mkdir(parents=True)
  fetch.SOURCE_OF["imdb/train.jsonl.gz"].prepare(archive, tmp_path / "out")
  for split, rows in (("train", IMDB_TRAIN), ("test", IMDB_TEST)):
    lines = gzip.decompress((tmp_path / "out" / "imdb" / f"{split}.jsonl.gz").read_bytes())
    assert [json.loads(line) for line in lines.splitlines()] == rows


def test_glove_is_one_member_of_its_archive(tmp_path):
  archive = tmp_path / "glove.6B.zip"
  with zipfile.ZipFile(archive, "w") as z:
    z.writestr("glove.6B.50d.txt", "the 1 2\n")
    z.writestr("glove.6B.300d.txt", "the 0.1 0.2 0.3\n")
  (tmp_path / "out" / "embeddings").mkdir(parents=True)
  fetch.SOURCE_OF["embeddings/glove.6B.300d.txt"].prepare(archive, tmp_path / "out")
  assert (tmp_path / "out/embeddings/glove.6B.300d.txt").read_text() == "the 0.1 0.2 0.3\n"


def test_without_the_stand_in_the_papers_glove_is_chosen(tmp_path, monkeypatch, caplog):
  from arc_jax.data import embeddings  # pylint: disable=import-outside-toplevel
  root = write_data_root(tmp_path / "root")
  assert embeddings.default_vectors("sst2", root).name == "w2v-movies.300d.txt.gz"
  shutil.move(root / embeddings.DEFAULT_VECTORS, root / "embeddings/glove.6B.300d.txt")
  with caplog.at_level("INFO"):
    assert embeddings.default_vectors("sst2", root) == root.resolve() / embeddings.PAPER_VECTORS[
        "sst2"]
  assert "the paper's GloVe for sst2" in caplog.text
  with pytest.raises(paths.DataFileNotFoundError, match="glove.840B.300d.txt"):
    embeddings.default_vectors("sst_trees", root)


REPO = Path(__file__).resolve().parents[2]


def _mirror_copy(folder: Path, changed: str | None = None) -> Path:
  """A mirror's copy of the real data folder (links to its files); ``changed``: one file whose
  last byte differs."""
  for relative in fetch.layout():
    (folder / relative).parent.mkdir(parents=True, exist_ok=True)
    if relative == changed:
      data = bytearray((REAL / relative).read_bytes())
      data[-1] ^= 1
      (folder / relative).write_bytes(bytes(data))
    else:
      (folder / relative).symlink_to(REAL / relative)
  return folder


@requires_real_data
@pytest.mark.parametrize("changed", [None, "sst2/dev.tsv.gz"])
def test_the_main_command_starts_from_a_mirror(tmp_path, changed):
  """The README's main command in an empty folder, with empty caches and no data folder anywhere:
  it downloads, verifies and prepares the data and trains (two steps here); a changed file on
  the server stops it with one line and status 2 before anything is kept."""
  served = _mirror_copy(tmp_path / "served", changed)
  work, cache = tmp_path / "work", tmp_path / "cache"
  work.mkdir()
  env = {k: v for k, v in os.environ.items() if k != "ARC_DATA_DIR"}
  with serving(served) as url:
    done = subprocess.run(
        [sys.executable, str(REPO / "experiments" / "train.py"), "--config.max_steps=2",
         "--config.num_train=64", "--config.num_dev=32", "--config.num_test=32"],
        capture_output=True, text=True, cwd=work, timeout=600, check=False,
        env=dict(env, ARC_DATA_MIRROR=url, ARC_CACHE_DIR=str(cache), HOME=str(tmp_path),
                 PYTHONPATH=str(REPO)))
  downloaded = cache / "data" / "mirror"
  if changed is None:
    assert done.returncode == 0, done.stderr[-3000:]
    for relative in ("sst2/train.tsv.gz", "synonyms/counterfitting_ppdb2_synonyms.txt.gz",
                     "stopwords.txt", "embeddings/w2v-movies.300d.txt.gz"):
      assert _sha256(downloaded / relative) == fetch.layout()[relative].checksum, relative
    config = json.loads(next(work.glob("runs/*/config.json")).read_text())
    assert config["data_source"] == "$ARC_DATA_MIRROR" and config["data_dir"] is None
    assert "Result: {'status': 'stopped', 'step': 2" in done.stderr
  else:
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: Refused sst2/dev.tsv.gz") and "expected" in last, last
    assert not (downloaded / changed).exists() and not _leftovers(cache)
    assert not list(work.glob("runs/*"))
