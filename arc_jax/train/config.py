"""The training configuration: every field, its default and its meaning; validation; run names.

Experiment configs (``experiments/configs/*.py``) start from :func:`default_config` and change
values only, so every run directory's ``config.json`` has the same keys. The defaults are the
original's LSTM ARC run on SST-2 under ``[(Del,2),(Sub,2)]`` (docs/ORIGINAL.md §5, §7). A field
added later defaults to what runs did before it existed, so older run directories read with
:func:`with_defaults` mean what they meant. The paper's rows are configs
(:mod:`arc_jax.configs`, ``experiments/configs/``), not part of the schema.
"""

from __future__ import annotations

import hashlib
import importlib
import re

import ml_collections
from ml_collections import config_dict

# Only what the schema needs: the command lines read configs (and --help lists their fields)
# without starting JAX; validate() imports the registries it checks against.
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
    "method": "training method, a key of arc_jax.train.METHODS: normal, augment, hotflip, arc, "
              "arc_a3t, a3t or one registered by a plugin",
    "model": "model family: lstm (LSTM / Bi-LSTM) or tree_lstm (Tree-LSTM)",
    "dataset": "sst2 or imdb (model lstm), sst_trees (model tree_lstm)",
    "data_dir": "data folder (only there); default $ARC_DATA_DIR, else ./data, else a download "
                "folder filled from $ARC_DATA_MIRROR or the public sources (docs/DATA.md)",
    "data_source": "set by the run, not by you: how its data folder was found (config.data_dir, "
                   "$ARC_DATA_DIR, ./data, $ARC_DATA_MIRROR or public sources)",
    "synonyms": "Sub's lexicon: ppdb or counterfitted",
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
    "bidirectional": "Bi-LSTM instead of LSTM",
    "cell": "the recurrent cell of model=lstm: lstm (the paper's) or gru, or a cell a plugin "
            "registers (arc_jax.nn.register_cell)",
    "pooling": "how the LSTM states become the features: final, mean, attention (the last "
               "state, the mean over positions, attention over positions)",
    "hidden": "LSTM (Tree-LSTM) hidden units",
    "projection": "units of the projection layer before the LSTM",
    "head_hidden": "units of the classifier's hidden layer",
    "dropout_rate": "dropout probability",
    "trainable_embeddings": "Tree-LSTM: train the word vectors too (else frozen)",
    "embedding_lr_scale": "Tree-LSTM: learning-rate factor of trained word vectors",
    "optimizer": "adam or adagrad (after gradient clipping and coupled L2)",
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
    "robust_loss": "worst_case or max_of_means (the original's binary loss)",
    "early_stopping": "stop after N epochs without dev improvement (0: never)",
    "abstracted": "arc_a3t / a3t: transformations of config.space abstracted by the DP "
                  "(comma-separated names, e.g. Del); the others are augmented",
    "augment_search": "arc_a3t / a3t: how the augmented part is explored: enumerate or hotflip",
    "augment_members": "arc_a3t / a3t: members of the augmented part each example trains on "
                       "besides x",
    "seed": "seed of parameters, dropout and data order",
    "eval_batch_size": "examples per evaluation batch (a multiple of the devices)",
    "log_every": "steps per metrics.jsonl line",
    "checkpoint_every": "steps between mid-epoch checkpoints",
    "max_steps": "stop (resumably) after this many steps",
    "progress": "show progress bars",
}
"""One line per config field, for ``train.py --help`` (a test checks it covers every field)."""


NUMERIC_RANGES = (
    (("lambda_start", "lambda_max", "eps_start", "eps_max", *DATA_CHECK_FIELDS), "in [0, 1]",
     lambda v: 0.0 <= v <= 1.0),
    (("dropout_rate",), "in [0, 1)", lambda v: 0.0 <= v < 1.0),
    (("learning_rate", "grad_clip"), "> 0", lambda v: v > 0),
    (("weight_decay", "embedding_lr_scale", "max_candidates", "early_stopping", "ramp_epochs",
      "max_dp_shapes"), ">= 0", lambda v: v >= 0),
    (("batch_size", "eval_batch_size", "log_every", "checkpoint_every", "num_epochs", "hidden",
      "projection", "head_hidden", "num_train", "num_dev", "num_test", "max_steps"), ">= 1",
     lambda v: v >= 1),
)
"""(fields, their range in words, its test) of the numeric fields :func:`validate` checks; unset
ones (None: all examples, no step limit) pass. NaN fails every test."""


class ConfigError(ValueError):
  """A setting that does not fit the others; the message names it and the choices or the fix."""


def default_config() -> ml_collections.ConfigDict:
  """ARC certified training of an LSTM on SST-2 for ``[(Del,2),(Sub,2)]`` (λ_max 0.5)."""
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

  # Model (arc_jax.nn.LSTMClassifier; the Tree-LSTM uses hidden and dropout_rate only).
  c.bidirectional = False
  c.cell = "lstm"  # the recurrent cell (arc_jax.nn.recurrent.CELLS)
  c.pooling = "final"
  c.hidden = 100
  c.projection = 100
  c.head_hidden = 100
  c.dropout_rate = 0.2
  # Tree-LSTM only: train the word vectors too, at embedding_lr_scale × learning_rate and without
  # weight decay (the original's second parameter group); False keeps them frozen.
  c.trainable_embeddings = False
  c.embedding_lr_scale = 0.1

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
  # ARC-A3T / A3T (arc_jax.train.augmented): the transformations of config.space abstracted
  # (comma-separated names, e.g. "Del"; the others are augmented), how the augmented part is
  # explored ("enumerate" or "hotflip") and how many of its members each example trains on
  # besides x.
  c.abstracted = ""
  c.augment_search = "enumerate"
  c.augment_members = 2

  # Bookkeeping.
  c.seed = 0  # parameters, dropout and data order
  c.eval_batch_size = 32
  c.log_every = 100  # steps per metrics line
  c.checkpoint_every = 500  # steps between mid-epoch checkpoints
  c.max_steps = config_dict.placeholder(int)  # stop (resumably) after this many steps
  c.progress = True  # tqdm bars
  return c


NAME_FIELDS = ("method", "model", "bidirectional", "dataset", "space")
"""The fields a run name stands for (:func:`derived_name`)."""


def space_key(spec: str) -> str:
  """A space's short name: the key of :data:`SPACE_NAMES` it equals up to order (``del2sub2``),
  else its transformations and budgets in lower case (``"[(Del,50),(Sub,50)]"`` → ``del50sub50``)."""
  pairs = re.compile(r"\(\s*(\w+)\s*,\s*(\d+)\s*\)").findall
  for key, named in SPACE_NAMES.items():
    if sorted(pairs(named)) == sorted(pairs(spec)):
      return key
  return "".join(f"{name.lower()}{delta}" for name, delta in pairs(spec)) or "space"


def derived_name(config: ml_collections.ConfigDict) -> str:
  """``<method>_<model>_<space>`` of the config (``arc_lstm_del2sub2``; ``imdb_`` before the
  model for IMDB)."""
  model = ("tree" if config.model == "tree_lstm" else "bilstm" if config.bidirectional
           else "lstm")
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
  suffix = "".join(f"_{k}{re.sub(r'[^A-Za-z0-9.-]+', '', str(config[k]))}" for k in extra)
  if len(suffix) > 60:
    suffix = "_" + hashlib.sha1(suffix.encode()).hexdigest()[:8]
  return name + suffix


BEFORE_FIELD = {"max_dp_shapes": 0}
"""Fields whose default differs from what runs did before the field existed: the value that
reproduces those runs."""


def with_defaults(saved: dict) -> ml_collections.ConfigDict:
  """A saved config (``config.json``) with the fields it predates set to what its run did: the
  default, or :data:`BEFORE_FIELD`'s value."""
  config = default_config()
  config.update(BEFORE_FIELD)
  config.update(saved)
  return config


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

  Imports ``config.plugins`` first (:func:`import_plugins`). ``training=False`` (evaluating a
  trained run, possibly under another space) skips the method's own checks
  (:attr:`arc_jax.train.methods.Method.check`), which concern how it trains.
  """
  # pylint: disable=import-outside-toplevel  (they need JAX; reading a config does not)
  from arc_jax.data.synonyms import SYNONYM_FILES
  from arc_jax.nn import CELLS
  from arc_jax.nn.models import POOLINGS
  from arc_jax.perturbation import parse_space
  from arc_jax.train.families import FAMILIES
  from arc_jax.train.losses import ROBUST_LOSSES
  from arc_jax.train.methods import METHODS
  from arc_jax.train.steps import OPTIMIZERS
  import_plugins(config)
  if config.method not in METHODS:
    raise ConfigError(f"config.method={config.method!r} is unknown; choose one of "
                      f"{sorted(METHODS)}.")
  if config.model not in FAMILIES:
    raise ConfigError(f"config.model={config.model!r} is unknown; choose one of "
                      f"{sorted(FAMILIES)}.")
  family = FAMILIES[config.model]
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
  if config.robust_loss not in ROBUST_LOSSES or config.robust_loss not in family.robust_losses:
    raise ConfigError(f"config.robust_loss={config.robust_loss!r} is not available for model "
                      f"{config.model!r}; choose one of {list(family.robust_losses)}.")
  for names, allowed, holds in NUMERIC_RANGES:
    for name in names:
      if config[name] is not None and not holds(config[name]):
        raise ConfigError(f"config.{name}={config[name]} must be {allowed}.")
  try:  # the spec's syntax and names; the lexicon is the data's, checked when it is loaded
    space = parse_space(config.space, synonyms={})
    family.check_space(space)
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
  if training and METHODS[config.method].check is not None:
    try:
      METHODS[config.method].check(config)
    except ValueError as error:
      raise ConfigError(f"config.method={config.method!r}: {error}") from None
  if config.trainable_embeddings and not family.trainable_embeddings:
    raise ConfigError(f"config.trainable_embeddings=True is not available for model "
                      f"{config.model!r}: its word vectors are frozen; set it to False.")
  if config.synonyms not in SYNONYM_FILES:
    raise ConfigError(f"config.synonyms={config.synonyms!r} is unknown; choose one of "
                      f"{sorted(SYNONYM_FILES)}.")
  if config.model == "lstm" and config.cell not in CELLS:
    raise ConfigError(f"config.cell={config.cell!r} is unknown; choose one of {sorted(CELLS)}.")
  if config.model == "lstm" and config.pooling not in POOLINGS:
    raise ConfigError(f"config.pooling={config.pooling!r} is unknown; choose one of "
                      f"{list(POOLINGS)}.")
  if config.optimizer not in OPTIMIZERS:
    raise ConfigError(f"config.optimizer={config.optimizer!r} is unknown; choose one of "
                      f"{sorted(OPTIMIZERS)}.")
