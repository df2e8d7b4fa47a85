"""A cell with a setting of its own, registered by a plugin module (tests/helpers/cell_plugin.py),
trains from the command line's config with no library file touched: the setting reaches the
cell through its block, ``config.scaled_gru``."""

import numpy as np
from arc_jax.cli import train
from arc_jax.data import ExperimentData
from arc_jax.train.families import FAMILIES

PLUGIN = "tests.helpers.cell_plugin"


def tiny_data() -> ExperimentData:
  return ExperimentData(splits={}, vocab={"<pad>": 0, "a": 1}, synonyms={}, stopwords=(),
                        embeddings=np.ones((2, 3), np.float32), stats={})


def test_a_plugin_cell_gets_its_setting_from_its_block():
  models = {}
  for scale in ("1.0", "0.5"):
    _, config, overridden = train.parse_flags([
        f"--config.plugins={PLUGIN}", "--config.lstm.cell=scaled_gru",
        f"--config.scaled_gru.init_scale={scale}", "--config.hidden=4"])
    assert config.scaled_gru.init_scale == float(scale) and "scaled_gru.init_scale" in overridden
    models[scale] = FAMILIES["lstm"].model.make_model(config, tiny_data())
  full, half = (m.forward_cell for m in models.values())
  assert type(full).__name__ == "ScaledGRUCell"
  for name in ("i2h", "h2h"):  # same seed: the halved cell's weights are half the others'
    for leaf in ("kernel", "bias"):
      np.testing.assert_array_equal(
          np.asarray(getattr(getattr(full, name), leaf)[...]) * 0.5,
          np.asarray(getattr(getattr(half, name), leaf)[...]))
