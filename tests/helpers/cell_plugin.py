"""A user module that registers a recurrent cell with a settings block of its own when imported,
as ``config.plugins`` names one (tests/nn/test_cell_plugin.py): the GRU with its initial weights
scaled by its ``init_scale`` setting. Its step is the GRU's, so every DP soundness argument for
the GRU holds for it."""

from arc_jax.nn import CELLS, register_cell
from arc_jax.nn.gru import GRUCell
from arc_jax.settings import Setting, Settings

SETTINGS = Settings("scaled_gru", {"init_scale": Setting(1.0, "factor of the initial weights")})


class ScaledGRUCell(GRUCell):
  def __init__(self, in_features: int, hidden: int, *, init_scale: float, **kwargs):
    super().__init__(in_features, hidden, **kwargs)
    for dense in (self.i2h, self.h2h):
      dense.kernel[...] = dense.kernel[...] * init_scale
      dense.bias[...] = dense.bias[...] * init_scale


if "scaled_gru" not in CELLS:
  register_cell("scaled_gru", settings=SETTINGS)(ScaledGRUCell)
