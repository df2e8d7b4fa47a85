"""Kept models that travel (arc_jax.train.export's kept data): the store rebuilds the embedding
matrix bit for bit and refuses a changed file; every kept model of results/ loads with
``arc_jax.load_run`` and certifies a sentence with no data folder, no cache and no network; no
committed config names a path of this machine."""

import io
import json
import re
import shutil
import socket
import zipfile
from pathlib import Path

import numpy as np
import pytest

import arc_jax
from arc_jax.certify import certify
from arc_jax.data import ExperimentData, from_nested, paths
from arc_jax.train.experiment import data_fingerprint
from tests.helpers.real_data import requires_data
from arc_jax.train.export import (MODEL_DIR, STORE_DIR, ExportError, keep_data, load_kept_data,
                                  save_model)

RESULTS = Path(__file__).resolve().parents[2] / "results"
KEPT = sorted(p.parent.parent.name for p in RESULTS.glob("*/model/meta.json"))
SAMPLE = ("normal_lstm", "arc_bilstm_del2sub2", "arc_lstm_review", "arc_tree_del2sub2")
"""One SST-2 LSTM, one Bi-LSTM, one S_review LSTM (every PPDB candidate), one Tree-LSTM with
trained word vectors."""


def fake_data(words, seed=0, zero=()):
  """ExperimentData without splits: ``words`` at rows 1.., random rows but ``zero`` ones."""
  rng = np.random.default_rng(seed)
  matrix = rng.normal(size=(len(words) + 1, 4)).astype(np.float32)
  matrix[0] = 0.0
  for w in zero:
    matrix[words.index(w) + 1] = 0.0
  return ExperimentData({}, {w: i + 1 for i, w in enumerate(words)}, matrix,
                        {words[0]: (words[1],)}, (words[-1],), {})


def kept_run(folder: Path, data) -> Path:
  """A run folder whose kept model is a tiny parameter and ``data``'s kept data."""
  params = {"w": np.ones(3, np.float32)}
  save_model(folder, params, params, {"step": 1, "data": data_fingerprint(data)}, data)
  return folder


def table_files(store: Path) -> list[Path]:
  return sorted(store.glob("vectors-*.npz"))


def test_kept_data_rebuilds_the_matrix_bit_for_bit(tmp_path):
  data = fake_data(["a", "b", "c", "d"], zero=["c"])
  data.embeddings[2, 1] = -0.0  # a sign bit that a float comparison would not see
  loaded = load_kept_data(kept_run(tmp_path / "run", data))
  assert loaded.embeddings.dtype == np.float32
  assert loaded.embeddings.tobytes() == data.embeddings.tobytes()
  assert loaded.vocab == data.vocab and loaded.splits == {}
  assert loaded.synonyms == data.synonyms and loaded.stopwords == data.stopwords


def test_runs_share_the_rows_of_the_words_they_share(tmp_path):
  first = fake_data(["a", "b", "c"])
  kept_run(tmp_path / "one", first)
  # a second vocabulary: the same vectors for a and b, a zero row for c (kept without a vector:
  # the first table disagrees there), and a new word
  second = fake_data(["b", "a", "c", "e"])
  second.embeddings[1:3] = first.embeddings[[2, 1]]
  second.embeddings[3] = 0.0
  kept_run(tmp_path / "two", second)
  store = tmp_path / STORE_DIR
  assert len(table_files(store)) == 2
  record = json.loads((tmp_path / "two" / MODEL_DIR / "meta.json").read_text())
  assert len(record["kept_data"]["vectors"]) == 1  # the first table disagrees on c: not used
  third = fake_data(["a", "b"])
  third.embeddings[1:] = first.embeddings[1:3]
  kept_run(tmp_path / "three", third)
  assert len(table_files(store)) == 2  # nothing new to store
  for name, data in (("one", first), ("two", second), ("three", third)):
    assert load_kept_data(tmp_path / name).embeddings.tobytes() == data.embeddings.tobytes()


def _change_one_float(path: Path) -> bytes:
  """The bytes of the table at ``path`` with one float changed."""
  with np.load(path) as table:
    words, vectors = table["words"], table["vectors"].copy()
  vectors[0, 0] += 1.0
  buffer = io.BytesIO()
  with zipfile.ZipFile(buffer, "w") as archive:
    for key, array in (("words", words), ("vectors", vectors)):
      with archive.open(f"{key}.npy", "w") as member:
        np.lib.format.write_array(member, array)
  return buffer.getvalue()


def test_a_changed_store_file_is_refused(tmp_path):
  run = kept_run(tmp_path / "run", fake_data(["a", "b", "c"]))
  table = table_files(tmp_path / STORE_DIR)[0]
  table.write_bytes(_change_one_float(table))
  with pytest.raises(ExportError, match="does not hold what its name says.*changed or damaged"):
    load_kept_data(run)


def test_a_matrix_other_than_the_trained_one_is_refused(tmp_path):
  """A table that is whole (its name matches its bytes) but not the one the run was exported
  with: the rebuilt matrix fails the fingerprint of the training data."""
  data = fake_data(["a", "b", "c"])
  run = kept_run(tmp_path / "run", data)
  keep_data(tmp_path / "other", fake_data(["a", "b", "c"], seed=1))
  meta = run / MODEL_DIR / "meta.json"
  record = json.loads(meta.read_text())
  other = table_files(tmp_path / "other")[0]
  shutil.copy(other, tmp_path / STORE_DIR / other.name)
  record["kept_data"]["vectors"] = [other.name]
  meta.write_text(json.dumps(record))
  with pytest.raises(ExportError, match="other than the one the model was trained on"):
    load_kept_data(run)


def test_store_files_are_found_in_the_model_folder_first(tmp_path):
  data = fake_data(["a", "b", "c"])
  run = kept_run(tmp_path / "run", data)
  alone = tmp_path / "elsewhere" / "run"
  shutil.copytree(run, alone)
  with pytest.raises(ExportError, match="neither there nor in"):
    load_kept_data(alone)
  for path in (tmp_path / STORE_DIR).iterdir():
    shutil.copy(path, alone / MODEL_DIR / path.name)
  assert load_kept_data(alone).embeddings.tobytes() == data.embeddings.tobytes()


def refuse_data(monkeypatch, folder: Path) -> None:
  """No data folder, an empty cache (in ``folder``, the working directory), no network; any read
  of the data folder fails."""
  for name in ("ARC_DATA_DIR", "ARC_DATA_MIRROR"):
    monkeypatch.delenv(name, raising=False)
  monkeypatch.setenv("ARC_CACHE_DIR", str(folder / "cache"))
  monkeypatch.chdir(folder)

  def refused(*args, **kwargs):
    raise AssertionError(f"a kept model read the data folder or the network ({args}, {kwargs})")

  # the functions' code, not their names: modules that imported them, now or during the test,
  # call them too
  for name in ("resolve", "data_folder", "find_data_file", "find_dataset_dir"):
    if hasattr(paths, name):
      monkeypatch.setattr(getattr(paths, name), "__code__", refused.__code__)
  monkeypatch.setattr(socket.socket, "connect", refused)


@pytest.fixture
def no_data(tmp_path, monkeypatch):
  refuse_data(monkeypatch, tmp_path)


def test_without_its_data_a_kept_model_would_read_the_data_folder(tmp_path, no_data):
  """The fixture's refusal is what the tests below rely on: a kept model that names no data
  rebuilds it from the data folder, and is refused."""
  run = tmp_path / "run"
  shutil.copytree(RESULTS / SAMPLE[0], run)
  meta = run / MODEL_DIR / "meta.json"
  meta.write_text(json.dumps({k: v for k, v in json.loads(meta.read_text()).items()
                              if k != "kept_data"}))
  with pytest.raises(AssertionError, match="read the data folder"):
    arc_jax.load_run(run)


def certify_one(run: Path):
  """load_run's model certifies one sentence (one tree) of its family under its space."""
  model, vocab, space = arc_jax.load_run(run)
  if json.loads((run / "config.json").read_text())["model"] == "tree_lstm":
    results = certify(model, space, [from_nested(("a", ("good", "movie")), root_label=3)], None,
                      vocab)
  else:
    results = certify(model, space, ["a good movie".split()], [1], vocab)
  assert results["certified"].shape == (1,) and np.isfinite(results["clean_logits"]).all()
  return results


def test_the_sample_is_kept():
  assert set(SAMPLE) <= set(KEPT)


@pytest.mark.parametrize("name", SAMPLE)
def test_kept_model_loads_and_certifies_with_no_data(name, no_data):
  certify_one(RESULTS / name)


@pytest.mark.slow
@pytest.mark.parametrize("name", KEPT)
def test_every_kept_model_loads_and_certifies_with_no_data(name, no_data):
  certify_one(RESULTS / name)


def test_the_committed_store_rebuilds_every_kept_matrix():
  """Every kept model names its data, and the store rebuilds the fingerprinted matrix (once per
  distinct data: the runs that name the same files and fingerprint share it)."""
  distinct = {}
  for name in KEPT:
    record = json.loads((RESULTS / name / MODEL_DIR / "meta.json").read_text())
    distinct.setdefault(json.dumps([record["kept_data"], record["meta"]["data"]]), name)
  assert len(distinct) == 3  # SST-2 with one and with every PPDB candidate, the SST trees
  for name in distinct.values():
    load_kept_data(RESULTS / name)


def test_a_tampered_committed_store_file_is_refused(tmp_path, no_data):
  run = tmp_path / "run"
  shutil.copytree(RESULTS / SAMPLE[0], run)
  kept = json.loads((run / MODEL_DIR / "meta.json").read_text())["kept_data"]
  for name in (kept["vocab"], kept["lexicon"], *kept["vectors"]):  # a run copied alone
    shutil.copy(RESULTS / STORE_DIR / name, run / MODEL_DIR / name)
  arc_jax.load_run(run)
  table = run / MODEL_DIR / kept["vectors"][0]
  table.write_bytes(_change_one_float(table))
  with pytest.raises(ExportError, match="changed or damaged"):
    arc_jax.load_run(run)


def test_every_kept_model_has_a_model_card():
  for name in KEPT:
    card = (RESULTS / name / "README.md").read_text()
    assert "python experiments/train.py" in card and f'load_run("results/{name}")' in card
    for results in (RESULTS / name / "eval").glob("*.json"):
      if "metrics" in json.loads(results.read_text()):
        assert f"eval/{results.name}" in card, (name, results.name)


def _machine_path(text: str) -> bool:
  """Whether ``text`` names a place on some machine: an absolute path (POSIX or Windows), a home
  folder, or a folder above the working directory (``../shared/data``)."""
  return (text.startswith(("/", "~", "\\")) or re.match(r"[A-Za-z]:[\\/]", text) is not None
          or ".." in re.split(r"[\\/]", text))


def _path_values(value):
  """Every string in a JSON value that names a place on a machine (:func:`_machine_path`)."""
  if isinstance(value, dict):
    for item in value.values():
      yield from _path_values(item)
  elif isinstance(value, list):
    for item in value:
      yield from _path_values(item)
  elif isinstance(value, str) and _machine_path(value):
    yield value


@pytest.mark.parametrize("text,named", [
    ("/work/shared/data", True), ("~/data", True), ("../shared/data", True),
    ("C:\\data", True), ("[(Del,2),(Sub,2)]", False), ("ppdb", False), ("./data", False)])
def test_machine_paths_are_recognised(text, named):
  assert _machine_path(text) is named


def test_no_committed_config_holds_a_path():
  configs = sorted(RESULTS.glob("**/config.json"))
  assert len(configs) >= len(KEPT)
  found = {str(p.relative_to(RESULTS)): list(_path_values(json.loads(p.read_text())))
           for p in configs}
  assert not {name: values for name, values in found.items() if values}
  assert not [p for p in configs if "data_dir" in json.loads(p.read_text())]




@requires_data
def test_an_exported_run_travels(tmp_path, monkeypatch):
  """experiments/export.py on a freshly trained run: portable config, model card, data in the
  store beside the destination; the export then loads and certifies with no data."""
  from tests.helpers.experiment_scripts import load_script  # pylint: disable=import-outside-toplevel
  from arc_jax.train import train_and_evaluate  # pylint: disable=import-outside-toplevel
  config = load_script("configs/normal").get_config()
  config.num_train = config.num_dev = config.num_test = 32
  config.num_epochs, config.progress = 1, False
  train_and_evaluate(config, tmp_path / "runs" / "normal_lstm")
  dest = tmp_path / "kept" / "normal_lstm"
  assert load_script("export").main(["--workdir", str(tmp_path / "runs" / "normal_lstm"),
                                     "--to", str(dest)]) == 0
  assert "data_dir" not in json.loads((dest / "config.json").read_text())
  card = (dest / "README.md").read_text()
  assert "--config experiments/configs/normal.py:lstm --config.num_dev=32" in card
  kept = json.loads((dest / MODEL_DIR / "meta.json").read_text())["kept_data"]
  assert {p.name for p in (tmp_path / "kept" / STORE_DIR).iterdir()} == {
      kept["vocab"], kept["lexicon"], *kept["vectors"]}
  refuse_data(monkeypatch, tmp_path)
  certify_one(dest)
