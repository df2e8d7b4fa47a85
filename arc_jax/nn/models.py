"""LSTM and Bi-LSTM text classifiers with the original ARC sizes (docs/ORIGINAL.md §3).

frozen embeddings (V, 300) → Linear 300→100 → ReLU → LSTM(100) (Bi-LSTM: 2×100) → pooled state
→ Dropout → Linear→100 → ReLU → Dropout → Linear→K.

Pooling: the final state, the mean of the states, or attention: Σ_i softmax(e)_i h_i over the
positions i of the sentence with a learned linear score e_i = w·h_i + b (for a Bi-LSTM h_i is the
concatenation of both directions' states at position i).

The concrete forward pass lives here; the certified (interval) forward pass is the DP in
:mod:`arc_jax.certify.lstm_dp` (:mod:`arc_jax.certify.attention_dp` for attention), which uses
the same layers.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import interval as iv
from arc_jax.domain import Domain, concatenate
from arc_jax.nn import recurrent
from arc_jax.nn.cells import Dense, Projection, dropout
from arc_jax.nn.distinct import per_distinct_id
from arc_jax.padding import reverse_padded

POOLINGS = ("final", "mean", "attention")


class FrozenEmbedding(nnx.Variable):
  """Pretrained word vectors: model state, but not an ``nnx.Param``, so optimisers skip them."""


def check_param_dtype(param_dtype) -> None:
  """Refuses float64 parameters while JAX's 64-bit mode is off (JAX would silently make them
  float32)."""
  if jnp.dtype(param_dtype) == jnp.float64 and jax.dtypes.canonicalize_dtype(jnp.float64) != (
      jnp.float64):
    raise ValueError("param_dtype=float64 needs JAX's 64-bit mode, which is off (JAX would make "
                     "the parameters float32): call jax.config.update('jax_enable_x64', True) "
                     "at startup or set JAX_ENABLE_X64=1.")


class LSTMClassifier(nnx.Module):
  """(Bi-)LSTM classifier, or the same classifier around another registered recurrent cell.

  Args:
    embeddings: (V, E) word vectors; row 0 is padding.
    hidden: state size of the cell (100 in the paper).
    projection: size of the input projection (100).
    head_hidden: size of the hidden layer of the head (100).
    num_classes: K.
    bidirectional: run a second LSTM on the reversed sentence and concatenate.
    pooling: ``"final"`` (last state), ``"mean"`` (mean of the states over positions) or
      ``"attention"`` (attention-weighted sum of the states; certified by
      :mod:`arc_jax.certify.attention_dp`).
    dropout_rate: dropout before each head layer (0.2 in the paper's runs).
    cell: the recurrent cell, a name of :data:`arc_jax.nn.recurrent.CELLS` (``"lstm"``, the
      paper's; ``"gru"``).
    cell_settings: the cell's settings (field → value) if it declares a block
      (:func:`arc_jax.nn.recurrent.register_cell`).
    rngs: parameter initialisation.
    param_dtype: dtype of the parameters and embeddings (float64 in soundness tests).
  """

  def __init__(self, embeddings: np.ndarray, *, hidden: int = 100, projection: int = 100,
               head_hidden: int = 100, num_classes: int = 2, bidirectional: bool = False,
               pooling: str = "final", dropout_rate: float = 0.2, cell: str = "lstm",
               cell_settings: dict | None = None, rngs: nnx.Rngs, param_dtype=jnp.float32):
    check_param_dtype(param_dtype)
    if pooling not in POOLINGS:
      raise ValueError(f"Unknown pooling {pooling!r}; choose one of {POOLINGS}.")
    kw = dict(rngs=rngs, param_dtype=param_dtype)
    self.embeddings = FrozenEmbedding(jnp.asarray(embeddings, param_dtype))
    self.projection = Projection(embeddings.shape[1], projection, **kw)
    new_cell = lambda: recurrent.make_cell(cell, projection, hidden, cell_settings, **kw)
    self.forward_cell = new_cell()
    self.backward_cell = new_cell() if bidirectional else None
    features = hidden * (2 if bidirectional else 1)
    self.attention = Dense(features, 1, **kw) if pooling == "attention" else None
    self.head_hidden = Dense(features, head_hidden, **kw)
    self.head_out = Dense(head_hidden, num_classes, **kw)
    self.hidden = hidden
    self.num_classes = num_classes
    self.bidirectional = bidirectional
    self.pooling = pooling
    self.dropout_rate = dropout_rate
    self.cell = cell

  @property
  def cells(self) -> tuple[recurrent.RecurrentCell, ...]:
    return (self.forward_cell,) + ((self.backward_cell,) if self.bidirectional else ())

  def embed(self, token_ids: jax.Array) -> jax.Array:
    """Word vectors (..., E) of ``token_ids`` (...); an id beyond the table gives NaN (the gather
    would clamp it to another word's vector), so nothing is certified about it."""
    return jnp.take(self.embeddings[...], token_ids, axis=0, mode="fill", fill_value=jnp.nan)

  def head_activations(self, features: iv.Value, dropout_key: jax.Array | None = None,
                       domain: Domain = iv.SOUND) -> iv.Value:
    """Pooled features (..., H_in) → the input of the last layer (..., head_hidden).

    The dropout masks depend only on ``dropout_key`` and the shape, so a box and a point pushed
    through with the same key see the same masks.
    """
    keys = (None, None) if dropout_key is None else jax.random.split(dropout_key)
    x = dropout(features, self.dropout_rate, keys[0], domain)
    x = domain.monotone(jax.nn.relu, self.head_hidden(x, domain))
    return dropout(x, self.dropout_rate, keys[1], domain)

  def head(self, features: iv.Value, dropout_key: jax.Array | None = None,
           domain: Domain = iv.SOUND) -> iv.Value:
    """Pooled features (..., H_in) → logits (..., K); arrays or abstract values."""
    return self.head_out(self.head_activations(features, dropout_key, domain), domain)

  def features(self, token_ids: jax.Array, lengths: jax.Array) -> jax.Array:
    """Pooled LSTM features (B, H_in) of padded sentences ``token_ids`` (B, N)."""
    chex.assert_rank(token_ids, 2)
    chex.assert_type([token_ids, lengths], int)
    return self._pooled(self._word_gates(token_ids), lengths)

  def features_from_embeddings(self, embedded: jax.Array, lengths: jax.Array) -> jax.Array:
    """Pooled LSTM features (B, H_in) of embedded padded sentences (B, N, E).

    The entry point for gradients with respect to the input word vectors (HotFlip); positions
    at or beyond ``lengths`` do not influence the result.
    """
    chex.assert_rank(embedded, 3)
    return self._pooled(self.input_gates(embedded), lengths)

  def position_states(self, token_ids: jax.Array, lengths: jax.Array) -> jax.Array:
    """The (concatenated) LSTM states (B, N, H_in) at every position, as attention reads them."""
    return self._aligned(self._runs(self._word_gates(token_ids), lengths), lengths)

  def input_gates(self, embedded: jax.Array) -> tuple[jax.Array, ...]:
    """Each direction's input gates (B, N, G) of embedded words (B, N, E)."""
    z = self.projection(embedded)
    return tuple(cell.input_gates(z) for cell in self.cells)

  def _word_gates(self, token_ids: jax.Array) -> tuple[jax.Array, ...]:
    """:meth:`input_gates` of words (B, N), computed once per distinct id (they depend on
    the word alone)."""
    return per_distinct_id(lambda ids: self.input_gates(self.embed(ids[None])), token_ids)

  def _pooled(self, gates: tuple[jax.Array, ...], lengths: jax.Array) -> jax.Array:
    """Pooled features (B, H_in) from each direction's input gates (B, N, G)."""
    return self.pool(self._runs(gates, lengths), lengths)

  def pool(self, runs, lengths: jax.Array, domain: Domain = iv.SOUND) -> iv.Value:
    """Pooled features (B, H_in) from each direction's run (final state (B, H), sum of the
    states (B, H), state at every position (B, N, H); the backward run's positions reversed
    within each sentence, as :meth:`_runs` gives them): arrays, or abstract values of
    ``domain`` that contain them (the rule of each pooling is sound in ``domain``).

    Raises:
      ValueError: a pooling this method has no rule for (a new pooling adds its rule here).
    """
    if self.pooling == "final":
      return concatenate([final for final, _, _ in runs])
    if self.pooling == "mean":
      total = concatenate([total for _, total, _ in runs])
      dtype = jax.tree.leaves(total)[0].dtype
      return domain.divide(total, jnp.maximum(lengths, 1)[:, None].astype(dtype))
    if self.pooling == "attention":
      states = self._aligned(runs, lengths)
      n_pad = jax.tree.leaves(states)[0].shape[1]
      return self.attend(states, jnp.arange(n_pad)[None, :] < lengths[:, None], domain)
    raise ValueError(f"No pooling rule for pooling={self.pooling!r}; choose one of {POOLINGS}.")

  def _runs(self, gates: tuple[jax.Array, ...], lengths: jax.Array
            ) -> list[tuple[jax.Array, ...]]:
    """:func:`~arc_jax.nn.recurrent.run` of each direction's cell on its input gates (B, N, G)
    (the backward direction's reversed within each sentence)."""
    directions = [gates[0]] + [reverse_padded(g, lengths) for g in gates[1:]]
    return [recurrent.run(cell, g, lengths) for cell, g in zip(self.cells, directions)]

  @staticmethod
  def _aligned(runs, lengths: jax.Array) -> iv.Value:
    """Per-position states of both directions side by side (the backward run reversed back);
    arrays or abstract values."""
    states = [runs[0][2]] + [jax.tree.map(lambda a: reverse_padded(a, lengths), s)
                             for _, _, s in runs[1:]]
    return concatenate(states)

  def attend(self, states: iv.Value, mask: jax.Array, domain: Domain = iv.SOUND) -> iv.Value:
    """Attention pooling of per-position states (..., P, H_in) where ``mask`` (..., P) is set."""
    scores = jax.tree.map(lambda a: a[..., 0], self.attention(states, domain))
    return domain.softmax_weighted_sum(scores, states, mask)

  def __call__(self, token_ids: jax.Array, lengths: jax.Array,
               dropout_key: jax.Array | None = None) -> jax.Array:
    """Logits (B, K) of padded sentences ``token_ids`` (B, N) with ``lengths`` (B,)."""
    return self.head(self.features(token_ids, lengths), dropout_key)


@functools.partial(jax.jit, static_argnums=0)
def predict(graphdef: nnx.GraphDef, state: nnx.State, token_ids: jax.Array, lengths: jax.Array
            ) -> jax.Array:
  """Jitted evaluation-mode logits (B, K) of ``nnx.merge(graphdef, state)``."""
  return nnx.merge(graphdef, state)(token_ids, lengths)
