"""Kept models (arc_jax.train.export): exact round trip of parameters, changed rows of trained
word vectors, clear errors; and a committed run of results/ re-evaluated from its kept model
gives its committed counts (skipped without the real data)."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arc_jax.data import paths
from arc_jax.train.export import SPARSE_DTYPE, ExportError, load_model, save_model

RESULTS = Path(__file__).resolve().parents[2] / "results"
KEPT_RUN = RESULTS / "normal_lstm"  # small (0.5 MB), Normal training, evaluated on 3 spaces


def params(seed=0, vocab=50):
  rng = np.random.default_rng(seed)
  table = rng.normal(size=(vocab, 8)).astype(np.float32)
  table[0] = 0.0  # padding row: the table comes from the data
  return {"embeddings": jnp.asarray(table),
          "cell": {"kernel": jnp.asarray(rng.normal(size=(8, 4)).astype(np.float32)),
                   "bias": jnp.asarray(rng.normal(size=(4,)).astype(np.float32))}}


def test_dense_parameters_round_trip_exactly(tmp_path):
  initial, trained = params(0), params(1)
  trained["embeddings"] = initial["embeddings"]  # frozen-like: unchanged table
  record = save_model(tmp_path, trained, initial, {"step": 7, "data": {"vocab_size": 50}})
  loaded, meta = load_model(tmp_path, initial, {"vocab_size": 50})
  assert meta["step"] == 7 and record["exact"]
  assert record["sparse"]["embeddings"]["rows"] == 0  # nothing changed: nothing stored
  for got, want in zip(jax.tree.leaves(loaded), jax.tree.leaves(trained)):
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_trained_word_vectors_keep_only_changed_rows_rounded(tmp_path):
  initial = params(0, vocab=1000)
  changed = np.array([3, 17, 999])
  table = np.asarray(initial["embeddings"]).copy()
  table[changed] += np.float32(0.01) * np.arange(1, 9, dtype=np.float32)
  trained = dict(initial, embeddings=jnp.asarray(table))
  record = save_model(tmp_path, trained, initial, {"step": 1})
  assert record["sparse"]["embeddings"] == {"rows": 3, "of": 1000,
                                            "dtype": np.dtype(SPARSE_DTYPE).name}
  assert not record["exact"]
  loaded, _ = load_model(tmp_path, initial)
  got = np.asarray(loaded["embeddings"])
  unchanged = np.setdiff1d(np.arange(1000), changed)
  assert np.array_equal(got[unchanged], table[unchanged])  # bit for bit
  delta = (table[changed] - np.asarray(initial["embeddings"])[changed]).astype(SPARSE_DTYPE)
  assert np.array_equal(got[changed], np.asarray(initial["embeddings"])[changed]
                        + delta.astype(np.float32))
  assert np.abs(got[changed] - table[changed]).max() < 1e-4
  size = sum(f.stat().st_size for f in (tmp_path / "model").iterdir())
  assert size < table.nbytes / 10  # 3 of 1,000 rows stored


def test_other_data_or_another_model_is_refused(tmp_path):
  initial = params(0)
  save_model(tmp_path, params(1), initial, {"step": 1, "data": {"vocab_size": 50}})
  with pytest.raises(ExportError, match="trained on other data"):
    load_model(tmp_path, initial, {"vocab_size": 51})
  with pytest.raises(ExportError, match="the run's config builds"):
    load_model(tmp_path, dict(initial, cell={"kernel": jnp.zeros((8, 5)),
                                             "bias": jnp.zeros(4)}))
  with pytest.raises(ExportError, match="do not match"):
    save_model(tmp_path, {"a": jnp.zeros(2)}, initial, {})


try:
  paths.find_data_file("sst2/train.tsv.gz")
  MISSING = None
except paths.DataFileNotFoundError as missing:
  MISSING = f"real data not found: {missing}"


def _committed(metrics):
  """A committed results file of KEPT_RUN with these metrics, and its counts."""
  for path in sorted((KEPT_RUN / "eval").glob("test_Del2Sub2*.json")):
    results = json.loads(path.read_text())
    if set(metrics) <= set(results["metrics"]):
      return results
  pytest.fail(f"no committed results with {metrics} in {KEPT_RUN / 'eval'}")


@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
@pytest.mark.parametrize("metrics", [("acc", "cf"),
                                     pytest.param(("acc", "cf", "ex", "hf"),
                                                  marks=pytest.mark.slow)])
def test_committed_run_reevaluated_from_its_kept_model_gives_its_counts(metrics):
  from arc_jax.evaluation import evaluate_run
  assert (KEPT_RUN / "model" / "params.npz").exists() and not (KEPT_RUN / "best").exists()
  committed = _committed(metrics)
  results = evaluate_run(KEPT_RUN, space=committed["space"], metrics=list(metrics),
                         progress=False)
  assert results["checkpoint"] == committed["checkpoint"]
  assert {m: results["metrics"][m]["count"] for m in metrics} == \
      {m: committed["metrics"][m]["count"] for m in metrics}


@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
def test_kept_model_with_frozen_vectors_evaluates_under_another_lexicon():
  """Every PPDB candidate (S_review's lexicon) adds words to the vocabulary of a run trained with
  one candidate per word; its frozen vectors and the data's words are unchanged, so the kept
  model loads (checked against the data of its own lexicon) and classifies the same sentences
  alike."""
  from arc_jax.evaluation import evaluate_run
  review = "[(Trans1,1),(Trans2,1),(Trans3,1),(Trans4,1),(Sub,2)]"
  own = evaluate_run(KEPT_RUN, space=review, metrics=["acc"], first=48, progress=False)
  other = evaluate_run(KEPT_RUN, space=review, metrics=["acc", "cf"], first=48, progress=False,
                       synonyms="ppdb", max_candidates=0)
  assert (other["synonyms"], other["max_candidates"]) == ("ppdb", 0)
  assert other["metrics"]["acc"]["count"] == own["metrics"]["acc"]["count"]
