"""Interval-aware Flax NNX layers and classifiers."""

from arc_jax.nn.cells import Dense, LSTMCell, Projection, dropout
from arc_jax.nn.models import FrozenEmbedding, LSTMClassifier, predict
