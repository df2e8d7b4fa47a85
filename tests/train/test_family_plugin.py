"""A model family with a setting of its own, registered by a plugin module
(tests/helpers/family_plugin.py), is chosen, checked and built from the command line's config
with no library file touched."""

import numpy as np
import pytest

from arc_jax.cli import train
from arc_jax.data import ExperimentData
from arc_jax.train import ConfigError, validate
from arc_jax.train.families import FAMILIES

FLAGS = ["--config.plugins=tests.helpers.family_plugin", "--config.model=wide_lstm",
         "--config.hidden=3"]


def test_a_plugin_family_gets_its_setting_from_its_block():
  _, config, _ = train.parse_flags([*FLAGS, "--config.wide_lstm.factor=4"])
  validate(config)
  data = ExperimentData(splits={}, vocab={"<pad>": 0, "a": 1}, synonyms={}, stopwords=(),
                        embeddings=np.ones((2, 3), np.float32), stats={})
  assert FAMILIES["wide_lstm"].model.make_model(config, data).hidden == 12
  config.wide_lstm.factor = 0
  with pytest.raises(ConfigError, match=r"^config\.wide_lstm\.factor=0 must be >= 1\.$"):
    validate(config)
