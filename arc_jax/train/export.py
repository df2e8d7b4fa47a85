"""A run's trained model as small plain files that load without Orbax and without the data.

:func:`arc_jax.train.run.export_run` writes ``dest/model/``:

  params.npz   one array per parameter leaf, keyed by its path in the ``nnx.State``
               (``"lstm.cell.kernel"``); float32, exact, for leaves the run made from scratch
  meta.json    the best checkpoint's meta (step, epoch, dev numbers, data fingerprint
               ``meta.data``: vocab_size and embeddings_sha1), per leaf stored sparsely how to
               rebuild it (``sparse``, ``exact``), and the data the model needs (``kept_data``)

A leaf that starts from the data (trained word vectors, ``trainable_embeddings``) is stored as
the rows that training changed, each as its float16 difference from the data's vectors: the
rebuilt table is the data's table plus those differences (``SPARSE_DTYPE``). Rounding the
differences changes the model a little: ``meta.json`` says whether the rebuilt parameters equal
the trained ones (``exact``); an inexact export must be evaluated from the export itself
(``export_run`` then copies no evaluation results).

The kept data (:func:`keep_data`, :func:`load_kept_data`) is what the model, its space and its
certifier need besides the parameters: the vocabulary, the embedding matrix (frozen vectors are
not parameters; trained ones start from it), the restricted synonym lexicon and the stop words.
Embedding matrices are large and runs share them, so these files live in a content-addressed
store, ``<results>/store/`` beside the run folders (an export to ``DIR`` writes to
``DIR/../store/``); every file is named ``<kind>-<first 16 hex digits of the sha256 of its
bytes><suffix>``, written once and never changed, and ``meta.json``'s ``kept_data`` names them:

  vocab      ``words-<h>.txt.gz``: the vocabulary, one word per line (UTF-8, gzip without
             timestamp); line i is row i + 1 of the matrix (row 0 is padding, zero)
  vectors    list of ``vectors-<h>.npz``: tables of word vectors (``words``: one string, the
             words joined by newlines; ``vectors``: float32 (N, D), row i the vector of word i),
             written as a zip without timestamps so equal tables are equal files
  lexicon    ``lexicon-<h>.json.gz``: ``{"synonyms": {word: [candidates]}, "stopwords": [...]}``
             (restricted to the vocabulary, in the data's order)
  dimension  D

Row i + 1 of the matrix is the vector of vocabulary word i in the first listed table that holds
it, zero if none does (words kept without vectors: Tree-LSTM leaves). An export lists the store's
tables that agree bit for bit with its matrix on every word they share and writes one new table
of its other words with non-zero rows, so the SST-2 vocabularies and the SST trees' share one set
of rows. Loading rebuilds the exact float32 matrix and checks it against ``meta.data`` (the same
sha1 as the training data's); a store file whose bytes do not match its name, or a matrix whose
fingerprint differs, is refused. The loader looks for each file in the run's own ``model/`` first
(a run copied alone carries its store files there), then in ``<run>/../store/``.

Beside ``model/`` the export copies ``config.json`` (without ``data_dir``: a kept model needs no
data folder), ``metrics.jsonl``, ``summary.json`` and ``eval/``, and writes a model card
``README.md`` (:func:`model_card`): the folder is a run directory without checkpoints, that
``arc_jax.load_run`` loads with no data folder and ``experiments/evaluate.py --workdir DEST``
evaluates with one (:func:`arc_jax.evaluation.restore_params`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shlex
import zipfile
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from arc_jax.data.prepare import ExperimentData
from arc_jax.train.config import flat_items, with_defaults
from arc_jax.train.experiment import data_fingerprint
from arc_jax.train.steps import trained_embedding_scale

MODEL_DIR = "model"
STORE_DIR = "store"
"""The content-addressed store of kept data, a sibling of the run folders."""
SPARSE_DTYPE = np.float16
"""dtype of the stored row differences of leaves that start from the data (word vectors)."""
HASH_DIGITS = 16
"""Hex digits of a store file's sha256 in its name."""
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


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


def save_model(dest, params, initial_params, meta: dict[str, Any],
               data: ExperimentData | None = None) -> dict[str, Any]:
  """Writes ``dest/model/`` from trained ``params``; returns what was written.

  ``initial_params`` are the freshly built model's parameters (same structure): a leaf whose
  rows partly equal them (word vectors copied from the data) is stored as its changed rows.
  ``data``: the data the model was trained on, kept in ``dest/../store/`` (:func:`keep_data`).
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
  if data is not None:
    record["kept_data"] = keep_data(store_folder(dest), data)
  _write_record(dest, record)
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
                      "on (its README.md names it).")
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


# --------------------------------------------------------------------------- kept data


def store_folder(run_dir) -> Path:
  """The store an exported run's data goes to: ``<run>/../store/``."""
  return Path(run_dir).resolve().parent / STORE_DIR


def has_kept_data(run_dir) -> bool:
  """Whether ``run_dir`` holds a kept model that names its data (loads with no data folder)."""
  return has_exported_model(run_dir) and "kept_data" in _record(run_dir)


def _record(run_dir) -> dict[str, Any]:
  return json.loads((Path(run_dir) / MODEL_DIR / "meta.json").read_text())


def _write_record(run_dir, record: dict[str, Any]) -> None:
  (Path(run_dir) / MODEL_DIR / "meta.json").write_text(json.dumps(record, indent=2) + "\n")


def _content_name(kind: str, suffix: str, content: bytes) -> str:
  return f"{kind}-{hashlib.sha256(content).hexdigest()[:HASH_DIGITS]}{suffix}"


def _put(store: Path, kind: str, suffix: str, content: bytes) -> str:
  """Writes ``content`` into ``store`` under its content name, unless it is there; the name."""
  name = _content_name(kind, suffix, content)
  path = store / name
  if not path.exists():
    store.mkdir(parents=True, exist_ok=True)
    partial = store / f".{name}.{os.getpid()}"
    partial.write_bytes(content)
    partial.replace(path)  # atomic: a reader never sees half a file
  return name


def _checked(path: Path) -> bytes:
  """The bytes of a store file, refused unless they hash to its name."""
  content = path.read_bytes()
  kind, _, rest = path.name.partition("-")
  if _content_name(kind, rest[HASH_DIGITS:], content) != path.name:
    raise ExportError(
        f"{path} does not hold what its name says (its sha256 begins "
        f"{hashlib.sha256(content).hexdigest()[:HASH_DIGITS]}): it was changed or damaged. "
        "Restore it from the repository, or export the run again (experiments/export.py).")
  return content


def _fetch(run_dir, name: str) -> bytes:
  """A store file of a run: from its own ``model/``, else from ``<run>/../store/``."""
  places = (Path(run_dir) / MODEL_DIR, store_folder(run_dir))
  for folder in places:
    if (folder / name).is_file():
      return _checked(folder / name)
  raise ExportError(f"The kept model in {places[0]} needs {name}, which is neither there nor in "
                    f"{places[1]}: copy it there from the store it was exported with.")


def _text(text: str) -> bytes:
  return gzip.compress(text.encode(), mtime=0)  # no timestamp: equal text, equal bytes


def _lines(text: str) -> list[str]:
  return text.split("\n") if text else []


def _npz(**arrays: np.ndarray) -> bytes:
  """An ``.npz`` (deflated) without timestamps: equal arrays give equal bytes."""
  buffer = io.BytesIO()
  with zipfile.ZipFile(buffer, "w") as archive:
    for key, array in arrays.items():
      info = zipfile.ZipInfo(f"{key}.npy", _ZIP_TIME)
      info.compress_type = zipfile.ZIP_DEFLATED
      with archive.open(info, "w") as member:
        np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)
  return buffer.getvalue()


def _table(content: bytes) -> tuple[list[str], np.ndarray]:
  """(words, float32 (N, D) vectors) of a ``vectors-*.npz`` table."""
  with np.load(io.BytesIO(content)) as archive:
    return _lines(str(archive["words"])), archive["vectors"]


def _vocab_words(data: ExperimentData) -> list[str]:
  """The vocabulary in row order (row i + 1 → word i), refused unless it is one line a word."""
  words = sorted(data.vocab, key=data.vocab.__getitem__)
  if [data.vocab[w] for w in words] != list(range(1, len(words) + 1)) or data.embeddings.shape[
      0] != len(words) + 1 or data.embeddings.dtype != np.float32:
    raise ExportError(f"The vocabulary ({len(words):,} words) is not rows 1.. of the float32 "
                      f"embedding matrix ({data.embeddings.dtype}{list(data.embeddings.shape)}).")
  broken = [w for w in words if "\n" in w]
  if broken:
    raise ExportError(f"Vocabulary words hold line breaks ({broken[:3]}); a kept vocabulary is "
                      "one word a line.")
  return words


def keep_data(store, data: ExperimentData) -> dict[str, Any]:
  """Writes what ``data``'s model, space and certifier need into ``store`` (see the module
  docstring); returns ``meta.json``'s ``kept_data``, the names of the files."""
  store, words = Path(store), _vocab_words(data)
  bits = np.ascontiguousarray(data.embeddings[1:]).view(np.uint32)  # compared bit for bit
  covered, tables = np.zeros(len(words), bool), []
  for path in sorted(store.glob("vectors-*.npz")):
    table_words, vectors = _table(_checked(path))
    index = {w: i for i, w in enumerate(table_words)}
    at = np.array([index.get(w, -1) for w in words], np.int64)
    shared = at >= 0
    if (vectors.shape[1:] == bits.shape[1:] and (shared & ~covered).any()
        and np.array_equal(vectors[at[shared]].view(np.uint32), bits[shared])):
      tables.append(path.name)
      covered |= shared
  new = ~covered & bits.any(axis=1)  # rows of zero bits are rebuilt as zeros
  if new.any():
    tables.append(_put(store, "vectors", ".npz", _npz(
        words=np.array("\n".join(np.array(words, object)[new])),
        vectors=bits[new].view(np.float32))))
  lexicon = {"synonyms": data.synonyms, "stopwords": list(data.stopwords)}
  return {"vocab": _put(store, "words", ".txt.gz", _text("\n".join(words))),
          "vectors": sorted(tables),  # they agree where they overlap: one order for equal data
          "lexicon": _put(store, "lexicon", ".json.gz",
                          _text(json.dumps(lexicon, ensure_ascii=False))),
          "dimension": bits.shape[1]}


def load_kept_data(run_dir) -> ExperimentData:
  """The data a kept model names (``kept_data``), with no splits: its vocabulary, the exact
  float32 embedding matrix (checked against the fingerprint of the data it was trained on), its
  synonym lexicon and stop words. Reads no data folder."""
  folder, record = Path(run_dir) / MODEL_DIR, _record(run_dir)
  refs = record.get("kept_data")
  if refs is None:
    raise ExportError(f"The kept model in {folder} names no kept data (it was exported before "
                      "kept models held their data): upgrade it once with the data folder, "
                      f"python experiments/export.py --upgrade {run_dir}.")
  words = _lines(gzip.decompress(_fetch(run_dir, refs["vocab"])).decode())
  row = {w: i + 1 for i, w in enumerate(words)}
  matrix = np.zeros((len(words) + 1, refs["dimension"]), np.float32)
  filled = np.zeros(len(words) + 1, bool)
  filled[0] = True  # padding: zero; words of a table outside the vocabulary land here too
  for name in refs["vectors"]:
    table_words, vectors = _table(_fetch(run_dir, name))
    at = np.array([row.get(w, 0) for w in table_words], np.int64)
    take = ~filled[at]
    matrix[at[take]] = vectors[take]
    filled[at[take]] = True
  lexicon = json.loads(gzip.decompress(_fetch(run_dir, refs["lexicon"])))
  synonyms = {w: tuple(c) for w, c in lexicon["synonyms"].items()}
  data = ExperimentData({}, row, matrix, synonyms, tuple(lexicon["stopwords"]),
                        {"vocab_size": len(matrix), "kept_data": refs})
  saved, found = record["meta"].get("data"), data_fingerprint(data)
  if found != saved:
    raise ExportError(f"The kept data of {folder} rebuilds an embedding matrix ({found}) other "
                      f"than the one the model was trained on ({saved}): a store file is not "
                      "the one it was exported with. Restore the store from the repository, or "
                      "export the run again.")
  return data


def keep_run_data(run_dir, data: ExperimentData) -> dict[str, Any]:
  """Adds ``data`` (the run's data, prepared from the data folder) to the kept model of
  ``run_dir``, if it is the data the model was trained on; returns ``kept_data``. Upgrades a model
  exported before kept models held their data."""
  record = _record(run_dir)
  saved, found = record["meta"].get("data"), data_fingerprint(data)
  if found != saved:
    raise ExportError(f"The model in {Path(run_dir) / MODEL_DIR} was trained on other data "
                      f"({saved}) than the data given ({found}); prepare the data of its config.")
  record["kept_data"] = keep_data(store_folder(run_dir), data)
  _write_record(run_dir, record)
  return record["kept_data"]


# --------------------------------------------------------------------------- model card

UNCOMMANDED_FIELDS = ("progress", "data_dir", "data_source")
"""Config fields a training command leaves out: they steer the process or record where its
data was found, not what the model is."""

METRIC_NAMES = {"acc": "Acc", "cf": "CF Acc", "ex": "EX Acc", "hf": "HF Acc", "exact": "exact"}


def portable_config(saved: dict[str, Any]) -> dict[str, Any]:
  """A run's ``config.json`` as a kept model keeps it: without ``data_dir``, which names a folder
  of the machine that trained it (a kept model needs none; evaluation finds one)."""
  return {k: v for k, v in saved.items() if k != "data_dir"}


def _argument(field: str, value: Any) -> str:
  return shlex.quote(f"--config.{field}={value}")


def training_command(saved: dict[str, Any], base: ml_collections.ConfigDict | None = None,
                     config_arg: str | None = None) -> str:
  """The ``experiments/train.py`` command line that trains the config ``saved`` (a
  ``config.json``): ``--config config_arg`` (a shipped config ``FILE[:ARG]`` whose config is
  ``base``; None: the defaults) and one ``--config.FIELD=VALUE`` per field that differs from it
  (fields the config predates mean what :func:`~arc_jax.train.config.with_defaults` says)."""
  base = flat_items((with_defaults({}) if base is None else base).to_dict())
  config = flat_items(with_defaults(saved).to_dict())
  overrides = [_argument(k, v) for k, v in sorted(config.items())
               if k not in UNCOMMANDED_FIELDS and base.get(k) != v]
  head = ["python", "experiments/train.py"]
  if config_arg is not None:
    head += ["--config", shlex.quote(f"experiments/configs/{config_arg}")]
  return " ".join(head + overrides)


def _metrics_rows(run_dir: Path) -> list[str]:
  """One Markdown table row per results file of ``run_dir/eval/``."""
  rows = []
  for path in sorted((run_dir / "eval").glob("*.json")):
    results = json.loads(path.read_text())
    if not isinstance(results, dict) or "metrics" not in results:
      continue
    values = ", ".join(f"{METRIC_NAMES.get(m, m)} {100 * entry['value']:.1f}"
                       for m, entry in results["metrics"].items())
    lexicon = f"{results.get('synonyms')}, max_candidates {results.get('max_candidates')}"
    rows.append(f"| `eval/{path.name}` | {results['split']} | `{results['space']}` | {lexicon} "
                f"| {results['examples']:,} | {values} |")
  return rows


def _load_example(run_dir: Path, model: str) -> str:
  if model == "tree_lstm":
    example = ('from arc_jax.data import from_nested\n'
               'tree = from_nested(("a", ("good", "movie")), root_label=3)\n'
               'print(certify(model, space, [tree], None, vocab)["certified"])')
  else:
    example = ('print(certify(model, space, ["a good movie".split()], [1], vocab)'
               '["certified"])')
  return ("```python\nimport arc_jax\nfrom arc_jax.certify import certify\n\n"
          f'model, vocab, space = arc_jax.load_run("results/{run_dir.name}")\n{example}\n```')


def model_card(run_dir, command: str) -> str:
  """The ``README.md`` of a kept model: what it was trained on and how, its numbers with the
  files they come from, the ``command`` that trained it, and how to load it."""
  run_dir = Path(run_dir)
  config = with_defaults(json.loads((run_dir / "config.json").read_text()))
  summary = json.loads((run_dir / "summary.json").read_text())
  record = _record(run_dir)
  meta, kept = record["meta"], record.get("kept_data", {})
  architecture = ("Tree-LSTM" if config.model == "tree_lstm" else
                  "Bi-LSTM" if config.lstm.bidirectional else "LSTM")
  vectors = "frozen"
  if trained_embedding_scale(config) is not None:
    changed = next(iter(record["sparse"].values()), None)
    vectors = ("trained" + (f" ({changed['rows']:,} of {changed['of']:,} rows changed, kept as "
                            f"{changed['dtype']} differences; exact: {record['exact']})"
                            if changed else ""))
  best = summary.get("best", {})
  lines = [
      f"# {config.name}",
      "",
      f"A {architecture} text classifier trained with the {config.method!r} method on "
      f"{config.dataset} under the space `{config.space}`, kept by arc_jax "
      "(arc_jax/train/export.py). It loads with no data folder.",
      "",
      "## Data",
      "",
      f"- dataset: `{config.dataset}` (config.dataset); Sub's lexicon: {config.synonyms}, "
      f"max_candidates {config.max_candidates} (0: every candidate); Del's stop words",
      f"- vocabulary and embeddings: {meta['data']['vocab_size']:,} rows × "
      f"{kept.get('dimension', '?')} float32, sha1 `{meta['data']['embeddings_sha1']}`; word "
      f"vectors {vectors}",
      f"- kept in `../store/` (model/meta.json `kept_data`): vocabulary `{kept.get('vocab')}`, "
      f"vectors {', '.join(f'`{v}`' for v in kept.get('vectors', []))}, lexicon "
      f"`{kept.get('lexicon')}`",
      "",
      "## Space and method",
      "",
      f"- space: `{config.space}` (certified by ARC, sampled by data augmentation, attacked by "
      "HotFlip, and the dev CF Acc logged every epoch)",
      f"- method: {config.method}, robust loss {config.robust_loss}, λ_max {config.lambda_max}, "
      f"{config.optimizer} lr {config.learning_rate}, batch {config.batch_size}, "
      f"{summary.get('epochs_trained')} of {config.num_epochs} epochs ({summary.get('status')})",
      f"- kept checkpoint: epoch {best.get('epoch', meta.get('epoch'))}, step "
      f"{meta['step']:,}, selected by {summary.get('selection')} (dev Acc "
      f"{100 * best.get('dev_acc', float('nan')):.1f}, dev CF Acc "
      f"{100 * best.get('dev_cf_acc', float('nan')):.1f})",
      "",
      "## Metrics",
      "",
      "Percent of the split's examples; each row is one results file of this folder "
      "(experiments/evaluate.py).",
      "",
      "| file | split | space | lexicon | examples | metrics |",
      "|---|---|---|---|---|---|",
      *_metrics_rows(run_dir),
      "",
      "## Training",
      "",
      "```sh",
      command,
      f"python experiments/export.py --workdir runs/{config.name}",
      "```",
      "",
      "## Loading",
      "",
      "`arc_jax.load_run` returns the model, its vocabulary (word → row) and its space, "
      "restricted to the vocabulary; no data folder, no network:",
      "",
      _load_example(run_dir, config.model),
      "",
      "Evaluating a split (`python experiments/evaluate.py --workdir results/"
      f"{run_dir.name}`) needs the data folder for the split.",
      "",
  ]
  return "\n".join(lines)


def write_model_card(run_dir, command: str) -> None:
  (Path(run_dir) / "README.md").write_text(model_card(run_dir, command))
