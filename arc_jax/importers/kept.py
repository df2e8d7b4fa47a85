"""An imported classifier as a kept model folder (the format of :mod:`arc_jax.train.export`), which
``arc_jax.load_run`` loads and ``arc-certify --model DIR`` certifies with no data folder.

The folder holds ``config.json`` (an arc_jax LSTM config whose sizes compute the source model
exactly, :func:`arc_jax.importers.layout.model_fields`), ``model/`` (``params.npz`` and
``meta.json`` written by :func:`~arc_jax.train.export.save_model`; ``meta.imported`` records the
source) and a ``README.md`` model card; the vocabulary, embedding rows, synonym lexicon and stop
words go to the content-addressed store ``DIR/../store/`` as for every kept model.

The vocabulary maps each word to its row of the source's embedding table; the kept model's row
i + 1 is the source row of its i-th word (row 0 is arc_jax's padding). As in arc_jax's own data,
a word outside the vocabulary is dropped from the sentence, not mapped to an unknown-word row.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from arc_jax.data import ExperimentData, load_synonyms, restrict_synonyms
from arc_jax.data.fetch import STOP_WORDS
from arc_jax.data.synonyms import SYNONYM_FILES
from arc_jax.importers import arc, flax_lstm, pytorch
from arc_jax.importers.layout import Classifier, ImporterError, arc_parameters, model_fields
from arc_jax.importers.layout import path_key
from arc_jax.train.config import validate, with_defaults
from arc_jax.train.experiment import build_experiment, data_fingerprint
from arc_jax.train.export import portable_config, save_model

SOURCES: dict[str, tuple[Callable, Callable, frozenset[str]]] = {
    "torch": (pytorch.read_state_dict, pytorch.import_state_dict,
              frozenset({"projection_relu", "embedding", "projection", "head"})),
    "flax": (flax_lstm.read_params, flax_lstm.import_params,
             frozenset({"projection_relu", "cells", "projection", "head"})),
    "arc": (pytorch.read_state_dict, arc.import_checkpoint, frozenset()),
}
"""Source framework → (file reader, importer, the layout options it takes besides pooling)."""

DATASETS = {"sst2": "lower-cased whitespace tokens, PTB escapes undone (SST-2)",
            "imdb": "Treebank tokens of the lower-cased text, <br /> removed (IMDB)"}
"""The tokenizations a kept LSTM model's ``config.dataset`` selects for ``arc-certify``."""


# --------------------------------------------------------------------------- vocabulary, lexicon


def read_vocab(path) -> dict[str, int]:
  """Word → row of the source's embedding table: a text file with the word of row i on line i
  (every row, blank lines refused), or a JSON object ``{word: row}`` (``.json``)."""
  path = Path(path)
  text = path.read_text(encoding="utf-8")
  if path.suffix == ".json":
    rows = json.loads(text)
    if not isinstance(rows, dict) or not all(isinstance(r, int) for r in rows.values()):
      raise ImporterError(f"{path}: expected a JSON object {{word: row}}.")
    return rows
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  blank = [i for i, w in enumerate(lines) if not w.strip()]
  if blank:
    raise ImporterError(f"{path}, line {blank[0] + 1}: blank; a vocabulary file holds the word of "
                        "row i on line i (use a JSON {word: row} for tables with unnamed rows).")
  vocab = {w: i for i, w in enumerate(lines)}
  if len(vocab) != len(lines):
    twice = sorted({w for w in lines if lines.count(w) > 1})[:5]
    raise ImporterError(f"{path}: the words {twice} appear on more than one line; each row needs "
                        "its own word.")
  return vocab


def kept_vocabulary(vocab: Mapping[str, int], table: np.ndarray
                    ) -> tuple[dict[str, int], np.ndarray]:
  """(word → arc_jax row, embedding matrix (n + 1, E) float32 with row 0 zero) of a source
  vocabulary (word → row of ``table`` (V, E)), words in the order of their source rows."""
  bad = [w for w, r in vocab.items() if not 0 <= r < len(table)]
  if bad:
    raise ImporterError(f"The vocabulary gives {bad[:3]} rows outside the embedding table "
                        f"({len(table)} rows); it does not belong to this model.")
  spaced = [w for w in vocab if not w or w != w.strip() or len(w.split()) != 1]
  if spaced:
    raise ImporterError(f"Vocabulary words {spaced[:3]} hold white space; tokens are split at "
                        "white space, so such a word could never be read.")
  words = sorted(vocab, key=vocab.__getitem__)
  rows = np.array([vocab[w] for w in words], np.int64)
  matrix = np.concatenate([np.zeros((1, table.shape[1]), np.float32),
                           np.asarray(table, np.float32)[rows]])
  return {w: i + 1 for i, w in enumerate(words)}, matrix


def read_lexicon(synonyms: str | None, words: Sequence[str], max_candidates: int | None = None,
                 data_root=None) -> dict[str, tuple[str, ...]]:
  """Sub's candidates restricted to ``words``: none (None or ``"none"``), arc_jax's lexicon
  ``"ppdb"`` / ``"counterfitted"`` from the data folder (at most ``max_candidates`` per word),
  or a JSON file (``.json`` or ``.json.gz``) ``{word: [candidates]}``."""
  if synonyms in (None, "none"):
    return {}
  if synonyms in SYNONYM_FILES:
    return load_synonyms(synonyms, set(words), max_candidates=max_candidates or None,
                         data_root=data_root)
  path = Path(synonyms)
  if not path.is_file():
    raise ImporterError(f"--synonyms {synonyms!r} is neither a lexicon ({sorted(SYNONYM_FILES)}, "
                        "none) nor a file; give a JSON file {word: [candidates]}.")
  raw = path.read_bytes()
  lexicon = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
  if not isinstance(lexicon, dict) or not all(isinstance(c, list) for c in lexicon.values()):
    raise ImporterError(f"{path}: expected a JSON object {{word: [candidates]}}.")
  kept = {w: [c for c in cs if c != w][:max_candidates or None] for w, cs in lexicon.items()}
  return restrict_synonyms(kept, set(words))


def read_stopwords(path=None) -> tuple[str, ...]:
  """Del's stop words: one per line of ``path``, default ARC's five (``a and the of to``)."""
  if path is None:
    return STOP_WORDS
  return tuple(w for w in (line.strip() for line in Path(path).read_text("utf-8").split("\n")) if w)


# --------------------------------------------------------------------------- the kept folder


def _filled(template, values: Mapping[str, np.ndarray]):
  """``template`` (the arc_jax model's parameter state) with each leaf replaced by ``values``."""
  if set(values) != {path_key(p) for p, _ in jax.tree_util.tree_flatten_with_path(template)[0]}:
    raise ImporterError("The imported parameters do not match arc_jax's model; this is a bug "
                        "in arc_jax.importers, please report it.")

  def leaf(path, old):
    new = values[path_key(path)]
    if new.shape != old.shape:
      raise ImporterError(f"Imported {path_key(path)} is {list(new.shape)}, arc_jax's model has "
                          f"{list(old.shape)}; this is a bug in arc_jax.importers.")
    return jax.device_put(jnp.asarray(new, old.dtype), getattr(old, "sharding", None))

  return jax.tree_util.tree_map_with_path(leaf, template)


def import_config(source: Classifier, *, name: str, space: str, dataset: str = "sst2",
                  synonyms: str | None = None, max_candidates: int | None = None):
  """The arc_jax config of an imported model (checked by :func:`~arc_jax.train.config.validate`):
  the model sizes that compute ``source``, its ``space`` and the tokenization of ``dataset``.
  A named lexicon (``ppdb``, ``counterfitted``) is recorded as ``config.synonyms``."""
  if dataset not in DATASETS:
    raise ImporterError(f"--dataset {dataset!r}: choose the tokenization of {sorted(DATASETS)}.")
  fields = {"name": name, "method": "normal", "model": "lstm", "dataset": dataset, "space": space,
            "lambda_max": 0.0, **model_fields(source)}
  if synonyms in SYNONYM_FILES:
    fields |= {"synonyms": synonyms, "max_candidates": max_candidates or 0}
  config = with_defaults(fields)
  validate(config)
  return config


def write_kept_model(dest, source: Classifier, vocab: Mapping[str, int], *, space: str,
                     provenance: Mapping, dataset: str = "sst2",
                     synonyms: Mapping[str, Sequence[str]] | None = None,
                     stopwords: Sequence[str] = STOP_WORDS, lexicon_name: str | None = None,
                     max_candidates: int | None = None) -> Path:
  """Writes ``source`` with its vocabulary (word → source row) as a kept model folder ``dest``
  (see the module docstring); returns ``dest``.

  ``synonyms``: Sub's candidates (kept restricted to the vocabulary); ``lexicon_name``: where
  they come from (for the config and the card); ``provenance``: what the source was (recorded
  in ``model/meta.json`` as ``imported`` and in the card).
  """
  dest = Path(dest)
  if dest.exists() and any(dest.iterdir()):
    raise ImporterError(f"{dest} exists and is not empty; choose another --out or remove it.")
  rows, matrix = kept_vocabulary(vocab, source.embeddings)
  data = ExperimentData({}, rows, matrix, restrict_synonyms(synonyms or {}, rows),
                        tuple(stopwords), {"vocab_size": len(matrix)})
  config = import_config(source, name=dest.name, space=space, dataset=dataset,
                         synonyms=lexicon_name, max_candidates=max_candidates)
  experiment = build_experiment(config, data=data)
  params = _filled(experiment.params, arc_parameters(source))
  dest.mkdir(parents=True, exist_ok=True)
  (dest / "config.json").write_text(
      json.dumps(portable_config(config.to_dict()), indent=2, sort_keys=True) + "\n")
  meta = {"step": 0, "data": data_fingerprint(data), "imported": dict(provenance)}
  record = save_model(dest, params, experiment.params, meta, data)
  (dest / "README.md").write_text(model_card(dest, config, source, data, record, lexicon_name))
  return dest


def file_provenance(kind: str, path, vocab_path, pooling: str) -> dict[str, str]:
  """What :func:`write_kept_model` records of a source file: framework, file name, sha256."""
  return {"from": kind, "file": Path(path).name, "pooling": pooling,
          "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest(),
          "vocab": Path(vocab_path).name}


def import_file(kind: str, path, vocab_path, dest, *, space: str, pooling: str = "final",
                dataset: str = "sst2", synonyms: str | None = None,
                max_candidates: int | None = None, stopwords_path=None,
                **options) -> Path:
  """Reads a source model file of framework ``kind`` (a key of :data:`SOURCES`) and its
  vocabulary, and writes the kept model folder ``dest``; ``options``: the importer's layout
  options (``projection_relu``, ``embedding``, ``cells``, ``projection``, ``head``)."""
  if kind not in SOURCES:
    raise ImporterError(f"--from {kind!r}: choose one of {sorted(SOURCES)}.")
  reader, importer, accepted = SOURCES[kind]
  given = {k: v for k, v in options.items() if v is not None}
  extra = sorted(set(given) - accepted)
  if extra:
    flags = ", ".join("--" + k.replace("_", "-") for k in extra)
    raise ImporterError(f"{flags}: not used by --from {kind}; leave it out.")
  source = importer(reader(path), pooling, **given)
  vocab = read_vocab(vocab_path)
  words = sorted(vocab, key=vocab.__getitem__)
  return write_kept_model(
      dest, source, vocab, space=space, dataset=dataset,
      synonyms=read_lexicon(synonyms, words, max_candidates), stopwords=read_stopwords(
          stopwords_path), lexicon_name=synonyms, max_candidates=max_candidates,
      provenance=file_provenance(kind, path, vocab_path, pooling))


# --------------------------------------------------------------------------- model card


def model_card(dest: Path, config, source: Classifier, data: ExperimentData, record: dict,
               lexicon_name: str | None) -> str:
  """The ``README.md`` of an imported model: where it came from, how it maps onto arc_jax's
  model, its data, and how to certify and load it."""
  imported, kept = record["meta"]["imported"], record["kept_data"]
  direction = "Bi-LSTM" if config.lstm.bidirectional else "LSTM"
  projection = ("none (the LSTM reads the word vectors; kept as an exact ±identity through a "
                "ReLU)" if source.projection is None else
                f"{source.projection.shape[0]}→{source.projection.shape[1]}"
                + (" + ReLU" if source.projection_relu else
                   " without activation (kept as an exact ± split through a ReLU)"))
  head = " → ReLU → ".join(f"{a.shape[0]}→{a.shape[1]}" for a in source.head)
  notes = [] if source.head[-1].shape[1] == 2 else [
      "- one output logit z is kept as the logits (0, z): class 1 iff z > 0"]
  if len(source.head) == 1:
    notes.append("- the one-layer head is kept as an exact ± split through a ReLU")
  lines = [
      f"# {config.name}",
      "",
      f"A {direction} text classifier imported by arc_jax (arc_jax/importers) from "
      f"`{imported['file']}` ({imported['from']}, sha256 `{imported['sha256'][:16]}…`) with the "
      f"vocabulary `{imported['vocab']}`. It was not trained by arc_jax; its logits are the "
      "source model's. It loads with no data folder.",
      "",
      "## Model",
      "",
      f"- embeddings: {data.embeddings.shape[0] - 1:,} words × {data.embeddings.shape[1]} "
      "(frozen); a word outside the vocabulary is dropped from the sentence",
      f"- projection: {projection}",
      f"- LSTM: hidden {config.hidden}, {direction}; pooling `{config.lstm.pooling}`",
      f"- head: {head}",
      *notes,
      "",
      "## Data and space",
      "",
      f"- tokenization: `{config.dataset}` ({DATASETS[config.dataset]})",
      f"- space: `{config.space}`; Sub's lexicon: {Path(lexicon_name or 'none').name} "
      f"({len(data.synonyms):,} words with candidates in the vocabulary); Del's stop words: "
      f"{' '.join(data.stopwords)}",
      f"- kept in `../store/` (model/meta.json `kept_data`): vocabulary `{kept['vocab']}`, "
      f"vectors {', '.join(f'`{v}`' for v in kept['vectors'])}, lexicon `{kept['lexicon']}`",
      "",
      "## Certifying and loading",
      "",
      "```sh",
      f"echo 'a good movie' | arc-certify --model {dest} -",
      "```",
      "",
      "```python",
      "import arc_jax",
      f'model, vocab, space = arc_jax.load_run("{dest}")',
      "```",
      "",
  ]
  return "\n".join(lines)
