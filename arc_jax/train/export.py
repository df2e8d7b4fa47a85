"""A run's trained model as small plain files that evaluation reloads without Orbax.

:func:`arc_jax.train.run.export_run` writes ``dest/model/``:

  params.npz   one array per parameter leaf, keyed by its path in the ``nnx.State``
               (``"lstm.cell.kernel"``); float32, exact, for leaves the run made from scratch
  meta.json    the best checkpoint's meta (step, epoch, dev numbers, data fingerprint) and,
               per leaf stored sparsely, how to rebuild it

A leaf that starts from the data (trained word vectors, ``trainable_embeddings``) is stored as
the rows that training changed, each as its float16 difference from the data's vectors: the
rebuilt table is the data's table plus those differences (``SPARSE_DTYPE``). Rounding the
differences changes the model a little: ``meta.json`` says whether the rebuilt parameters equal
the trained ones (``exact``); an inexact export must be evaluated from the export itself
(``export_run`` then copies no evaluation results). Frozen vectors are not
parameters and are rebuilt from the data files, as evaluation always does.

Beside ``model/`` the export copies ``config.json``, ``metrics.jsonl``, ``summary.json`` and
``eval/``: the folder is a run directory without checkpoints, and
``experiments/evaluate.py --workdir DEST`` evaluates it (:func:`restore_exported`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np

MODEL_DIR = "model"
SPARSE_DTYPE = np.float16
"""dtype of the stored row differences of leaves that start from the data (word vectors)."""


class ExportError(RuntimeError):
  """The export cannot be written or does not fit the model that reads it."""


def _key(path) -> str:
  return ".".join(str(getattr(p, "key", getattr(p, "idx", p))) for p in path)


def _leaves(state) -> dict[str, np.ndarray]:
  """Path string → host array of every leaf of an ``nnx.State``."""
  flat, _ = jax.tree_util.tree_flatten_with_path(state)
  return {_key(path): np.asarray(jax.device_get(leaf)) for path, leaf in flat}


def has_exported_model(run_dir) -> bool:
  return (Path(run_dir) / MODEL_DIR / "meta.json").exists()


def save_model(dest, params, initial_params, meta: dict[str, Any]) -> dict[str, Any]:
  """Writes ``dest/model/`` from trained ``params``; returns what was written.

  ``initial_params`` are the freshly built model's parameters (same structure): a leaf whose
  rows partly equal them (word vectors copied from the data) is stored as its changed rows.
  """
  trained, initial = _leaves(params), _leaves(initial_params)
  if trained.keys() != initial.keys():
    raise ExportError(f"The parameters ({sorted(trained)}) do not match the model built from the "
                      f"config ({sorted(initial)}).")
  dense, sparse, exact = {}, {}, True
  for key, value in trained.items():
    start = initial[key]
    same_rows = (value == start).reshape(len(value), -1).all(axis=1) if value.ndim == 2 else None
    if same_rows is not None and same_rows.any() and _from_data(start):
      rows = np.flatnonzero(~same_rows).astype(np.int32)
      dense[f"{key}.rows"] = rows
      delta = (value[rows] - start[rows]).astype(SPARSE_DTYPE)
      dense[f"{key}.delta"] = delta
      exact &= bool(np.array_equal(start[rows] + delta.astype(start.dtype), value[rows]))
      sparse[key] = {"rows": len(rows), "of": len(value), "dtype": np.dtype(SPARSE_DTYPE).name}
    else:
      dense[key] = value
  folder = Path(dest) / MODEL_DIR
  folder.mkdir(parents=True, exist_ok=True)
  np.savez_compressed(folder / "params.npz", **dense)
  record = {"meta": meta, "sparse": sparse, "exact": exact}
  (folder / "meta.json").write_text(json.dumps(record, indent=2) + "\n")
  return record


def _from_data(initial: np.ndarray) -> bool:
  """Whether a 2-D leaf starts as a table of data vectors: its first row (padding) is zero.

  Randomly initialised kernels have no all-zero row; the embedding tables reserve row 0.
  """
  return not initial[0].any()


def load_model(run_dir, initial_params, fingerprint: dict[str, Any] | None = None):
  """(params, meta) from ``run_dir/model/``, in the structure of ``initial_params``.

  ``initial_params`` are the model built from the run's config: they give the structure, and
  the data's vectors that sparse leaves are differences from. ``fingerprint`` (the experiment's
  ``data_fingerprint()``) is compared with the one the run trained on.
  """
  folder = Path(run_dir) / MODEL_DIR
  record = json.loads((folder / "meta.json").read_text())
  saved = record["meta"].get("data")
  if fingerprint is not None and saved is not None and saved != fingerprint:
    raise ExportError(f"The model in {folder} was trained on other data ({saved}) than the "
                      f"data found now ({fingerprint}); evaluate it with the data it was trained "
                      "on (see shared/data/PROVENANCE.md).")
  stored = np.load(folder / "params.npz")
  flat, treedef = jax.tree_util.tree_flatten_with_path(initial_params)
  leaves = []
  for path, template in flat:
    key = _key(path)
    start = np.asarray(jax.device_get(template))
    if key in record["sparse"]:
      value = start.copy()
      rows = stored[f"{key}.rows"]
      value[rows] = start[rows] + stored[f"{key}.delta"].astype(start.dtype)
    elif key in stored:
      value = stored[key]
    else:
      raise ExportError(f"{folder / 'params.npz'} has no parameter {key!r}; it was exported "
                        "from another model than the run's config builds.")
    if value.shape != start.shape or value.dtype != start.dtype:
      raise ExportError(f"Parameter {key!r} in {folder} is {value.dtype}{list(value.shape)}; "
                        f"the run's config builds {start.dtype}{list(start.shape)}.")
    leaves.append(jax.device_put(value, getattr(template, "sharding", None)))
  return jax.tree_util.tree_unflatten(treedef, leaves), record["meta"]
