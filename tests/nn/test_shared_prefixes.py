"""Prefix-shared logits: the trie's layout, and the logits of predict for every string.

* ``build``: one node per distinct non-empty prefix, every node's parent in an earlier scan step
  (so the scan reads computed states only) and holding the node's prefix minus its last word,
  each string's leaf its own last prefix; for random strings with repeats, prefixes of one
  another and empty strings, at chunk sizes down to 1.
* ``predict_shared`` equals ``predict`` on every string (float64, to 1e-12: the same arithmetic
  batched differently), for LSTMs, Bi-LSTMs and a Bi-GRU, final and mean pooling, random
  weights at two scales; attention pooling is refused with the function to use.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given, settings, strategies as st

from arc_jax.nn import predict
from arc_jax.nn.shared_prefixes import build, predict_shared
from tests.helpers.lstm_models import make_model

strings = st.lists(st.lists(st.integers(1, 4), max_size=6), min_size=1, max_size=40)


def prefix_of_row(trie):
  """The word ids of each buffer row's prefix, read back through the parents."""
  tokens, parents = trie.tokens.reshape(-1), trie.parents.reshape(-1)
  prefixes = {0: ()}
  for slot in range(tokens.size):  # parents precede their children
    if parents[slot] in prefixes and (slot == 0 or tokens[slot]):
      prefixes[slot + 1] = prefixes[int(parents[slot])] + (int(tokens[slot]),)
  return prefixes


@settings(max_examples=150, deadline=None)
@given(strings, st.integers(1, 9))
def test_the_trie_has_one_node_per_distinct_prefix_and_parents_come_first(rows, chunk):
  trie = build([np.asarray(r, np.int64) for r in rows], chunk)
  distinct = {tuple(r[:d]) for r in rows for d in range(1, len(r) + 1)}
  assert trie.nodes == len(distinct)
  assert int(np.count_nonzero(trie.tokens)) == trie.nodes  # word ids are >= 1, padding 0
  step_of_row = lambda row: (row - 1) // chunk
  for j in range(trie.tokens.shape[0]):
    real = trie.tokens[j] != 0
    parents = trie.parents[j][real]
    assert np.all((parents == 0) | (step_of_row(parents) < j))
  prefixes = prefix_of_row(trie)
  assert set(prefixes.values()) - {()} == distinct
  assert [prefixes[int(leaf)] for leaf in trie.leaves] == [tuple(r) for r in rows]


@pytest.fixture(autouse=True, scope="module")
def float64():
  with jax.enable_x64(True):
    yield


def padded(rows):
  width = max([len(r) for r in rows] + [1])
  ids = np.zeros((len(rows), width), np.int32)
  for out, r in zip(ids, rows):
    out[:len(r)] = r
  return jnp.asarray(ids), jnp.asarray([len(r) for r in rows], jnp.int32)


@settings(max_examples=12, deadline=None)
@given(strings, st.integers(0, 3), st.sampled_from([(False, "final"), (True, "mean"),
                                                    (False, "mean"), (True, "final")]),
       st.sampled_from([1.0, 4.0]), st.sampled_from([2, 7, 256]))
def test_shared_logits_equal_predict(rows, seed, kind, scale, chunk):
  bidirectional, pooling = kind
  model = make_model(seed, 3, scale, bidirectional, pooling=pooling)
  graphdef, state = nnx.split(model)
  shared = np.asarray(predict_shared(graphdef, state, [np.asarray(r) for r in rows], chunk=chunk))
  np.testing.assert_allclose(shared, np.asarray(predict(graphdef, state, *padded(rows))),
                             rtol=1e-12, atol=1e-12)


def test_shared_logits_of_another_cell_equal_predict():
  model = make_model(1, 3, 4.0, True, pooling="mean", cell="gru")
  graphdef, state = nnx.split(model)
  rows = [[1, 2, 3], [1, 2], [], [3, 1, 2, 2], [1, 2, 3]]
  np.testing.assert_allclose(np.asarray(predict_shared(graphdef, state, rows, chunk=2)),
                             np.asarray(predict(graphdef, state, *padded(rows))),
                             rtol=1e-12, atol=1e-12)


def test_attention_pooling_is_refused():
  graphdef, state = nnx.split(make_model(0, 3, 1.0, False, pooling="attention"))
  with pytest.raises(ValueError, match="arc_jax.nn.predict"):
    predict_shared(graphdef, state, [[1, 2]])
