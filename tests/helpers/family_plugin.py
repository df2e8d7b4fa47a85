"""A user module that registers a model family with a settings block of its own when imported, as
``config.plugins`` names one (tests/train/test_family_plugin.py): the sequence family's data,
batches and searches with an LSTM whose hidden width is ``config.wide_lstm.factor`` times
``config.hidden``."""

import dataclasses

from flax import nnx

from arc_jax.nn import LSTMClassifier
from arc_jax.settings import Setting, Settings
from arc_jax.train.families import FAMILIES, SEQUENCE, register_family

SETTINGS = Settings("wide_lstm", {"factor": Setting(2, "hidden units per config.hidden unit",
                                                    valid=(">= 1", lambda v: v >= 1))})


def make_model(config, data) -> LSTMClassifier:
  return LSTMClassifier(data.embeddings, hidden=config.hidden * config.wide_lstm.factor,
                        projection=4, head_hidden=4, dropout_rate=config.dropout_rate,
                        rngs=nnx.Rngs(config.seed))


if "wide_lstm" not in FAMILIES:
  register_family(dataclasses.replace(
      SEQUENCE, name="wide_lstm", settings=SETTINGS,
      model=dataclasses.replace(SEQUENCE.model, make_model=make_model)))
