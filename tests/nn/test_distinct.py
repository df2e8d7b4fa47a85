"""per_distinct_id: every entry gets the row of its id, at every capacity and beyond them; the
LSTM's word path through it against its per-entry path from embeddings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from arc_jax.nn.distinct import per_distinct_id
from arc_jax.nn.models import LSTMClassifier


@pytest.mark.parametrize("distinct", [1, 4, 5, 16, 17, 40])
def test_per_distinct_id_gives_every_entry_the_row_of_its_id(distinct):
  # Capacities 4 and 16 of 40 entries: up to 4 distinct ids run at 4, up to 16 at 16, the rest
  # at all 40 (each capacity at its edges).
  rng = np.random.default_rng(distinct)
  values = rng.permutation(100)[:distinct]
  ids = jnp.asarray(rng.permutation(values[np.arange(40) % distinct]).reshape(4, 10), jnp.int32)
  table = rng.normal(size=(100, 3)).astype(np.float32)
  out = per_distinct_id(lambda d: (jnp.asarray(table)[d][None], 2 * d[None]), ids,
                        capacities=(4, 16))
  np.testing.assert_array_equal(out[0], table[np.asarray(ids)])
  np.testing.assert_array_equal(out[1], 2 * np.asarray(ids))


@pytest.mark.parametrize("pooling", ["final", "mean", "attention"])
def test_lstm_word_path_equals_its_per_entry_path(pooling):
  # 10 sentences of up to 12 of 12 words: 120 entries and at most 12 distinct ids, so the word
  # path computes the input gates at capacity 64 and gathers them back.
  with jax.enable_x64(True):
    rng = np.random.default_rng(0)
    model = LSTMClassifier(rng.normal(size=(12, 5)), hidden=4, projection=3, head_hidden=3,
                           bidirectional=True, pooling=pooling, rngs=nnx.Rngs(0),
                           param_dtype=jnp.float64)
    lengths = jnp.asarray([12, 1, 4, 7, 9, 2, 12, 5, 11, 3])
    ids = jnp.asarray(rng.integers(1, 12, size=(10, 12)) * (np.arange(12) < lengths[:, None]))
    words = model.features(ids, lengths)
    entries = model.features_from_embeddings(model.embed(ids), lengths)
    np.testing.assert_allclose(words, entries, rtol=1e-12, atol=1e-12)
    assert not np.allclose(words[0], words[1])  # the sentences' features differ
