"""The training configuration: every field, its default and its meaning; validation; run names.

Experiment configs (``experiments/configs/*.py``) start from :func:`default_config` and change
values only, so every run directory's ``config.json`` has the same keys. The defaults are the
original's LSTM ARC run on SST-2 under ``[(Del,2),(Sub,2)]`` (docs/ORIGINAL.md §5, §7). A field
added later defaults to what runs did before it existed, so older run directories read with
:func:`with_defaults` mean what they meant. The paper's rows are configs
(:mod:`arc_jax.configs`, ``experiments/configs/``), not part of the schema.

This module holds the fields every run has. A training method, a model family or a cell with
settings of its own declares them beside its code as a :class:`arc_jax.settings.Settings` block
(``Method.settings``, ``ModelFamily.settings``, ``register_cell(name, settings=...)``), and the
config holds each registered block as ``config.<block>.<field>`` (``config.lstm.pooling``,
``config.augmented.abstracted``): adding one edits no shared file. Configs written before the
blocks existed kept those fields flat; :func:`migrate` moves them (:data:`LEGACY_FIELDS`).
"""

from __future__ import annotations

import hashlib
import importlib
import re
import warnings
from typing import Any, Callable, Iterable

import ml_collections
from ml_collections import config_dict

from arc_jax.settings import Settings, merged

from arc_jax.perturbation.shapes import MAX_DP_SHAPES

SPACE_NAMES = {
    "del2sub2": "[(Del,2),(Sub,2)]",
    "sub2ins2": "[(Sub,2),(Ins,2)]",
    "del2ins2": "[(Del,2),(Ins,2)]",
    "review": "[(Trans1,1),(Trans2,1),(Trans3,1),(Trans4,1),(Sub,2)]",
}
"""Short names of spaces in run names (:func:`space_key`): the paper's SST-2 spaces (S_review
last), which its configs select by these keys (:data:`arc_jax.configs.PAPER_SPACES`)."""

DATA_CHECK_FIELDS = ("min_vocab_coverage", "max_empty_share", "min_transformation_share")
"""The thresholds of the data sanity checks (:func:`arc_jax.train.experiment.check_data`)."""

RUN_CONTROL_FIELDS = ("max_steps", "progress", "log_every", "checkpoint_every", "data_dir",
                      "data_source", *DATA_CHECK_FIELDS)
"""Fields that may differ when an unfinished run is resumed: they steer the process, not the
result (``checkpoint_every`` and ``log_every`` only change when files are written; a moved data
folder is checked by the data fingerprint of the checkpoints; the data checks only refuse
data)."""

SPACE_MEMORY_LIMIT = 4 * 2**30
"""Bytes of DP states (:meth:`arc_jax.perturbation.spaces.Signature.dp_memory_estimate` for a
sentence of ``NOMINAL_LENGTH`` tokens) above which a space is refused unless
``config.allow_large_space``."""

NOMINAL_LENGTH = 64
"""Tokens per sentence assumed by the space guard (SST-2's longest sentence has 56)."""

FIELD_HELP = {
    "name": "run name: the default --workdir is runs/<name> (overrides of other fields extend it)",
    "method": "training method (arc_jax.train.METHODS; plugins may register more)",
    "model": "model family (arc_jax.train.families.FAMILIES): lstm is the LSTM / Bi-LSTM, "
             "tree_lstm the Tree-LSTM",
    "dataset": "a dataset of the model family: sst2 or imdb (model lstm), sst_trees (model "
               "tree_lstm)",
    "data_dir": "data folder (only there); default $ARC_DATA_DIR, else ./data, else a download "
                "folder filled from $ARC_DATA_MIRROR or the public sources (docs/DATA.md)",
    "data_source": "set by the run, not by you: how its data folder was found (config.data_dir, "
                   "$ARC_DATA_DIR, ./data, $ARC_DATA_MIRROR or public sources)",
    "synonyms": "Sub's lexicon",
    "max_candidates": "Sub candidates per word, in file order (1: ARC's --use-fewer-sub; 0: all)",
    "num_train": "use the first N training examples (default all)",
    "num_dev": "use the first N dev examples (default all)",
    "num_test": "use the first N test examples (default all)",
    "min_vocab_coverage": "refuse a vector file that has vectors for less than this share of "
                          "the vocabulary (0.0: no check)",
    "max_empty_share": "refuse data with more than this share of a split's sentences left "
                       "empty by the vocabulary (1.0: no check)",
    "min_transformation_share": "refuse a space with a transformation that rewrites less than "
                                "this share of the training sentences (0.0: no check)",
    "space": "perturbation space certified (arc), sampled (augment), attacked (hotflip) and "
             "reported on dev, e.g. [(Del,2),(Sub,2)]",
    "allow_large_space": "accept a space whose DP would need more than 4 GiB per batch",
    "max_dp_shapes": "most (padded width, DP grid) shapes certified batches run on, each one "
                     "compilation per jitted step (0: every length bucket and reachable grid); "
                     "it decides which sentences share a training batch, so a run resumes only "
                     "with its own value",
    "plugins": "comma-separated Python modules imported before the config is checked, e.g. "
               "ones that register transformations for config.space (register_transformation)",
    "hidden": "LSTM (Tree-LSTM) hidden units",
    "dropout_rate": "dropout probability",
    "optimizer": "optimiser, after gradient clipping and coupled L2",
    "batch_size": "training examples per step (a multiple of the devices)",
    "learning_rate": "optimiser learning rate",
    "weight_decay": "coupled L2 weight (torch's weight_decay)",
    "grad_clip": "global gradient-norm clip",
    "num_epochs": "training epochs",
    "ramp_epochs": "epochs over which λ and ε rise from start to max",
    "lambda_start": "weight of the robust loss at epoch 0",
    "lambda_max": "weight of the robust loss after the ramp (0: no certified training)",
    "eps_start": "hull scale ε at epoch 0",
    "eps_max": "hull scale ε after the ramp",
    "robust_loss": "the robust loss (max_of_means: the original's binary loss)",
    "early_stopping": "stop after N epochs without dev improvement (0: never)",
    "seed": "seed of parameters, dropout and data order",
    "eval_batch_size": "examples per evaluation batch (a multiple of the devices)",
    "log_every": "steps per metrics.jsonl line",
    "checkpoint_every": "steps between mid-epoch checkpoints",
    "max_steps": "stop (resumably) after this many steps",
    "progress": "show progress bars",
}
"""One line per shared config field, for ``train.py --help`` (a test checks it covers every
field); the fields with a registry of values get its names appended (:func:`choices`)."""


def choices() -> dict[str, list[str]]:
  """Shared fields whose value names a registry entry → the registered names (read when asked,
  so entries that plugins register count), for --help and :func:`validate`."""
  # pylint: disable=import-outside-toplevel  (the registries import JAX; the schema does not)
  from arc_jax.data.synonyms import SYNONYM_FILES
  from arc_jax.train.families import FAMILIES
  from arc_jax.train.losses import ROBUST_LOSSES
  from arc_jax.train.methods import METHODS
  from arc_jax.train.steps import OPTIMIZERS
  return {"method": list(METHODS), "model": list(FAMILIES), "synonyms": list(SYNONYM_FILES),
          "optimizer": list(OPTIMIZERS), "robust_loss": list(ROBUST_LOSSES)}


LEGACY_FIELDS = {
    **dict.fromkeys(("bidirectional", "cell", "pooling", "projection", "head_hidden"), "lstm"),
    **dict.fromkeys(("trainable_embeddings", "embedding_lr_scale"), "tree_lstm"),
    **dict.fromkeys(("abstracted", "augment_search", "augment_members"), "augmented"),
}
"""Fields that configs written before the settings blocks held flat → the block that owns them
now (a fixed record of that layout, for :func:`migrate`)."""


NUMERIC_RANGES = (
    (("lambda_start", "lambda_max", "eps_start", "eps_max", *DATA_CHECK_FIELDS), "in [0, 1]",
     lambda v: 0.0 <= v <= 1.0),
    (("dropout_rate",), "in [0, 1)", lambda v: 0.0 <= v < 1.0),
    (("learning_rate", "grad_clip"), "> 0", lambda v: v > 0),
    (("weight_decay", "max_candidates", "early_stopping", "ramp_epochs", "max_dp_shapes"),
     ">= 0", lambda v: v >= 0),
    (("batch_size", "eval_batch_size", "log_every", "checkpoint_every", "num_epochs", "hidden",
      "num_train", "num_dev", "num_test", "max_steps"), ">= 1", lambda v: v >= 1),
)
"""(fields, their range in words, its test) of the numeric shared fields :func:`validate`
checks (a block's own are :attr:`arc_jax.settings.Setting.valid`); unset ones (None: all
examples, no step limit) pass. NaN fails every test."""


class ConfigError(ValueError):
  """A setting that does not fit the others; the message names it and the choices or the fix."""


def registered_blocks() -> dict[str, Settings]:
  """Block name → the settings block of every registered method, model family and cell."""
  # pylint: disable=import-outside-toplevel  (the registries import JAX; the schema does not)
  from arc_jax.nn.recurrent import CELL_SETTINGS
  from arc_jax.train.families import FAMILIES
  from arc_jax.train.methods import METHODS
  return merged([*(m.settings for m in METHODS.values()),
                 *(f.settings for f in FAMILIES.values()), *CELL_SETTINGS.values()])


def add_blocks(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Adds the defaults of each registered block ``config`` lacks (one a plugin registered after
  the config was made); returns ``config``."""
  with config.unlocked():
    for name, block in registered_blocks().items():
      if name not in config:
        config[name] = block.defaults()
  return config


def default_config() -> ml_collections.ConfigDict:
  """ARC certified training of an LSTM on SST-2 for ``[(Del,2),(Sub,2)]`` (λ_max 0.5), with
  every registered settings block at its defaults."""
  c = ml_collections.ConfigDict()
  c.name = "arc_lstm_del2sub2"
  c.method = "arc"  # a key of arc_jax.train.METHODS
  # The model family (a key of arc_jax.train.families.FAMILIES): "lstm" (LSTM / Bi-LSTM, datasets
  # sst2, imdb) or "tree_lstm" (Tree-LSTM, dataset sst_trees).
  c.model = "lstm"

  # Data (the family's prepare_data). Counts limit a split to its first examples.
  c.dataset = "sst2"
  c.synonyms = "ppdb"  # ARC's SST-2 runs: PPDB with --use-fewer-sub (one candidate per word)
  c.max_candidates = 1  # 0: every candidate
  c.num_train = config_dict.placeholder(int)
  c.num_dev = config_dict.placeholder(int)
  c.num_test = config_dict.placeholder(int)
  c.data_dir = config_dict.placeholder(str)  # arc_jax.data.paths.resolve
  c.data_source = config_dict.placeholder(str)  # written by train_and_evaluate
  # Data sanity (arc_jax.train.experiment.check_data, which gives the shares of shared/data):
  # refuse data whose vector file covers less of the vocabulary, whose splits are left emptier,
  # or on whose training sentences a transformation of config.space fires less often than this.
  c.min_vocab_coverage = 0.1
  c.max_empty_share = 0.25
  c.min_transformation_share = 0.001
  # The perturbation space certified (ARC), sampled (augment) and reported on dev.
  c.space = "[(Del,2),(Sub,2)]"
  c.allow_large_space = False  # see SPACE_MEMORY_LIMIT
  # Batches run on at most this many (width, DP grid) shapes (arc_jax.perturbation.shapes): each
  # compiles every jitted DP step once and holds about 1,300 of the process's memory maps on
  # CPU (Linux allows 65,530 by default); 0 runs every batch on its length bucket and exact
  # reachable grid.
  c.max_dp_shapes = MAX_DP_SHAPES
  # Modules imported before anything else (import_plugins), e.g. "mypkg.transforms" registering
  # transformations that config.space names (arc_jax.register_transformation).
  c.plugins = ""

  # Model: the sizes every family has; a family's own are its block (config.lstm, ...).
  c.hidden = 100
  c.dropout_rate = 0.2

  # Optimiser: clip the global norm, add coupled L2 (torch's weight_decay), then
  # arc_jax.train.steps.OPTIMIZERS[optimizer]: "adam" (LSTMs) or "adagrad" (Tree-LSTM).
  c.optimizer = "adam"
  c.batch_size = 32
  c.learning_rate = 1e-3
  c.weight_decay = 1e-4
  c.grad_clip = 0.25

  # Curriculum: λ and ε follow linspace(start, max, ramp_epochs)[epoch], then stay at max.
  c.num_epochs = 24
  c.ramp_epochs = 16
  c.lambda_start = 0.0
  c.lambda_max = 0.5
  c.eps_start = 0.0
  c.eps_max = 1.0
  c.robust_loss = "worst_case"  # or "max_of_means" (the original's binary loss)
  c.early_stopping = 0  # stop after this many epochs without dev improvement; 0: never

  # Bookkeeping.
  c.seed = 0  # parameters, dropout and data order
  c.eval_batch_size = 32
  c.log_every = 100  # steps per metrics line
  c.checkpoint_every = 500  # steps between mid-epoch checkpoints
  c.max_steps = config_dict.placeholder(int)  # stop (resumably) after this many steps
  c.progress = True  # tqdm bars
  return add_blocks(c)


NAME_FIELDS = ("method", "model", "lstm.bidirectional", "dataset", "space")
"""The fields a run name stands for (:func:`derived_name`)."""


def field_value(config, dotted: str) -> Any:
  """``config.<a>.<b>`` of ``dotted`` ``"a.b"`` (a block's field) or ``config.<a>``."""
  value = config
  for part in dotted.split("."):
    value = value[part]
  return value


def flat_items(values: dict) -> dict[str, Any]:
  """A config dict's fields as ``"block.field"`` → value (shared fields as they are)."""
  return {f"{k}.{f}" if isinstance(v, dict) else k: x
          for k, v in values.items() for f, x in (v.items() if isinstance(v, dict) else [(k, v)])}


def space_key(spec: str) -> str:
  """A space's short name: the key of :data:`SPACE_NAMES` it equals up to order (``del2sub2``),
  else its transformations and budgets in lower case (``"[(Del,50),(Sub,50)]"`` → ``del50sub50``)."""
  pairs = re.compile(r"\(\s*(\w+)\s*,\s*(\d+)\s*\)").findall
  for key, named in SPACE_NAMES.items():
    if sorted(pairs(named)) == sorted(pairs(spec)):
      return key
  return "".join(f"{name.lower()}{delta}" for name, delta in pairs(spec)) or "space"


def derived_name(config: ml_collections.ConfigDict) -> str:
  """``<method>_<model>_<space>`` of the config (``arc_lstm_del2sub2``; ``bi`` before a model
  whose block says ``bidirectional``; ``imdb_`` before the model for IMDB)."""
  bidirectional = (config.get(config.model) or {}).get("bidirectional", False)
  model = "tree" if config.model == "tree_lstm" else "bi" * bidirectional + config.model
  dataset = "" if config.dataset in ("sst2", "sst_trees") else f"{config.dataset}_"
  return f"{config.method}_{dataset}{model}_{space_key(config.space)}"


def run_name(config: ml_collections.ConfigDict, overridden) -> str:
  """The name of a run of ``config`` whose fields ``overridden`` were set on the command line.

  The config file's ``name`` when nothing it stands for changed; :func:`derived_name` when the
  method, model, dataset or space were overridden; then ``_<field><value>`` per other
  overridden field that changes the result (``_seed1``), so that an override never lands in
  another experiment's default run directory. An overridden ``name`` is kept as given.
  """
  overridden = set(overridden)
  if "name" in overridden:
    return config.name
  name = derived_name(config) if overridden & set(NAME_FIELDS) else config.name
  extra = sorted(overridden - set(NAME_FIELDS) - set(RUN_CONTROL_FIELDS))
  suffix = "".join(f"_{k.rpartition('.')[2]}"
                   f"{re.sub(r'[^A-Za-z0-9.-]+', '', str(field_value(config, k)))}"
                   for k in extra)
  if len(suffix) > 60:
    suffix = "_" + hashlib.sha1(suffix.encode()).hexdigest()[:8]
  return name + suffix


BEFORE_FIELD = {"max_dp_shapes": 0}
"""Fields whose default differs from what runs did before the field existed: the value that
reproduces those runs."""


def migrate(saved: dict) -> dict:
  """``saved`` (a config as a dict) with its flat fields of :data:`LEGACY_FIELDS` moved into
  their blocks; a config in today's layout is returned as it is. The one place the old layout is
  read: every committed run's ``config.json`` loads through it (tests/train/test_config.py)."""
  out = {k: dict(v) if isinstance(v, dict) else v for k, v in saved.items()
         if k not in LEGACY_FIELDS}
  for field, block in LEGACY_FIELDS.items():
    if field in saved:
      out.setdefault(block, {})[field] = saved[field]
  return out


def merge(config: ml_collections.ConfigDict, values: dict) -> ml_collections.ConfigDict:
  """Sets ``values`` (a config as a dict, blocks as dicts) on ``config``, a block's fields one
  by one (a saved block may predate some of its fields); returns ``config``."""
  for key, value in values.items():
    if isinstance(value, dict) and key in config:
      for field, x in value.items():
        config[key][field] = x
    else:
      config[key] = value
  return config


def with_defaults(saved: dict) -> ml_collections.ConfigDict:
  """A saved config (``config.json``) with the fields it predates set to what its run did: the
  default, or :data:`BEFORE_FIELD`'s value; flat fields of the old layout moved into their
  blocks (:func:`migrate`)."""
  config = default_config()
  config.update(BEFORE_FIELD)
  values = migrate(saved)
  with config.unlocked():
    merge(config, values)
  import_plugins(config)
  return add_blocks(config)


def _check_space_size(space, config: ml_collections.ConfigDict) -> None:
  """Refuses a space whose DP states would not fit (:data:`SPACE_MEMORY_LIMIT`)."""
  batch = max(config.batch_size, config.eval_batch_size)
  estimate = space.signature.dp_memory_estimate(batch, config.hidden, NOMINAL_LENGTH)
  if estimate > SPACE_MEMORY_LIMIT and not config.allow_large_space:
    raise ConfigError(
        f"config.space={config.space!r} has {space.grid_size():,} budget slots per position; "
        f"its DP states alone need about {estimate / 2**30:.1f} GiB per batch of {batch} "
        f"(hidden {config.hidden}, {NOMINAL_LENGTH} tokens), over the "
        f"{SPACE_MEMORY_LIMIT / 2**30:.0f} GiB guard. Use smaller budgets or batches, or pass "
        "--config.allow_large_space=True to try anyway.")


def import_plugins(config: ml_collections.ConfigDict) -> None:
  """Imports the modules of ``config.plugins`` (comma-separated), e.g. ones that register
  transformations on import (:func:`arc_jax.register_transformation`); :func:`validate` calls
  it first, so a run's plugins are loaded wherever its config is checked (training, evaluation,
  :func:`arc_jax.load_run`)."""
  for name in filter(None, (n.strip() for n in config.plugins.split(","))):
    try:
      importlib.import_module(name)
    except ImportError as error:
      raise ConfigError(f"config.plugins: cannot import {name!r} ({error}); install it or put "
                        "its folder on PYTHONPATH.") from None


def validate(config: ml_collections.ConfigDict, *, training: bool = True) -> None:
  """Raises :class:`ConfigError` naming the field and the fix for inconsistent settings.

  Imports ``config.plugins`` first (:func:`import_plugins`) and adds the blocks they register.
  Checks the shared fields, then the chosen method's and model family's blocks
  (:meth:`arc_jax.settings.Settings.check`). ``training=False`` (evaluating a trained run,
  possibly under another space) skips the method's own checks
  (:attr:`arc_jax.train.methods.Method.check`), which concern how it trains.
  """
  # pylint: disable=import-outside-toplevel  (they need JAX; reading a config does not)
  from arc_jax.perturbation import parse_space
  from arc_jax.train.families import FAMILIES
  from arc_jax.train.methods import METHODS
  import_plugins(config)
  add_blocks(config)
  legacy = sorted(set(config) & set(LEGACY_FIELDS))
  if legacy:
    raise ConfigError(f"config.{legacy[0]} is now config.{LEGACY_FIELDS[legacy[0]]}."
                      f"{legacy[0]}: set that field instead.")
  for field, names in choices().items():
    if config[field] not in names:
      raise ConfigError(f"config.{field}={config[field]!r} is unknown; choose one of "
                        f"{sorted(names)}.")
  family, method = FAMILIES[config.model], METHODS[config.method]
  if config.dataset not in family.datasets:
    owner = [f.name for f in FAMILIES.values() if config.dataset in f.datasets]
    raise ConfigError(f"config.dataset={config.dataset!r} is not a dataset of model "
                      f"{config.model!r} (its datasets: {list(family.datasets)})"
                      + (f"; it is one of model {owner[0]!r}: set config.model={owner[0]!r}."
                         if owner else "."))
  if config.method in family.unsupported_methods:
    raise ConfigError(f"config.method={config.method!r} is not available for model "
                      f"{config.model!r}; choose one of "
                      f"{sorted(set(METHODS) - set(family.unsupported_methods))}.")
  if config.robust_loss not in family.robust_losses:
    raise ConfigError(f"config.robust_loss={config.robust_loss!r} is not available for model "
                      f"{config.model!r}; choose one of {list(family.robust_losses)}.")
  for names, allowed, holds in NUMERIC_RANGES:
    for name in names:
      if config[name] is not None and not holds(config[name]):
        raise ConfigError(f"config.{name}={config[name]} must be {allowed}.")
  for block in filter(None, (family.settings, method.settings)):
    try:
      block.check(config[block.name])
    except ValueError as error:
      raise ConfigError(str(error)) from None
  try:  # the spec's syntax and names; the lexicon is the data's, checked when it is loaded
    space = parse_space(config.space, synonyms={})
    family.lowering.check_space(space)
  except ValueError as error:
    raise ConfigError(f"config.space={config.space!r}: {error}") from None
  if not space.transformations:
    raise ConfigError(f"config.space={config.space!r} has no transformation; list at least one, "
                      "e.g. [(Del,2),(Sub,2)].")
  for name, delta in zip(space.names, space.budgets):
    if delta < 1:
      raise ConfigError(f"config.space={config.space!r}: {name} has budget {delta} and never "
                        "applies; give it a budget >= 1 or leave it out.")
  _check_space_size(space, config)
  if training and method.check is not None:
    try:
      method.check(config)
    except ValueError as error:
      raise ConfigError(f"config.method={config.method!r}: {error}") from None
