"""Interval-aware Flax NNX layers and classifiers."""

from arc_jax.nn import gru  # noqa: F401  (registers cell="gru")
from arc_jax.nn.cells import Dense, LSTMCell, Projection, dropout
from arc_jax.nn.gru import GRUCell
from arc_jax.nn.models import FrozenEmbedding, LSTMClassifier, predict
from arc_jax.nn.recurrent import CELLS, register_cell
