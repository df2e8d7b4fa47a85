"""The GRU cell (arc_jax.nn.gru) and the cell registry: PyTorch's GRU equations, sound boxes.

Its DP soundness against enumeration runs with the LSTM's tests (tests/certify/test_certify.py,
test_attention.py and test_float_soundness.py take ``cell="gru"``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from arc_jax import interval as iv
from arc_jax.nn import CELLS, GRUCell, LSTMClassifier
from arc_jax.nn.recurrent import run


def torch_gru_step(x, h, w_ih, b_ih, w_hh, b_hh):
  """PyTorch's ``nn.GRU`` step in numpy (weights in its [r | z | n] layout, here (in, 3H))."""
  sigmoid = lambda a: 1.0 / (1.0 + np.exp(-a))
  gi, gh = x @ w_ih + b_ih, h @ w_hh + b_hh
  hidden = h.shape[-1]
  part = lambda a, i: a[..., i * hidden:(i + 1) * hidden]
  r = sigmoid(part(gi, 0) + part(gh, 0))
  z = sigmoid(part(gi, 1) + part(gh, 1))
  n = np.tanh(part(gi, 2) + r * part(gh, 2))
  return (1.0 - z) * n + z * h


def test_the_gru_step_is_pytorchs():
  with jax.enable_x64(True):
    cell = GRUCell(3, 4, rngs=nnx.Rngs(0), param_dtype=jnp.float64)
    rng = np.random.default_rng(0)
    x, h = rng.normal(size=(5, 3)), rng.normal(size=(5, 4))
    (new,) = cell((jnp.asarray(h),), jnp.asarray(x))
    expected = torch_gru_step(x, h, *(np.asarray(a[...]) for a in (
        cell.i2h.kernel, cell.i2h.bias, cell.h2h.kernel, cell.h2h.bias)))
    np.testing.assert_allclose(new, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_gru_boxes_hold_every_sampled_concrete_run_in_float32(scale):
  """The interval run (what A3T's abstraction and the DPs step) holds the concrete run of every
  sampled input inside the input boxes, float32, no tolerance."""
  cell = GRUCell(3, 4, rngs=nnx.Rngs(1))
  graphdef, state = nnx.split(cell)
  cell = nnx.merge(graphdef, jax.tree.map(lambda p: p * scale, state))
  rng = np.random.default_rng(2)
  centre = rng.normal(size=(2, 6, 3)).astype(np.float32)
  radius = np.abs(rng.normal(size=centre.shape)).astype(np.float32) * 0.3
  lengths = jnp.asarray([6, 3])
  box = iv.Interval(jnp.asarray(centre - radius), jnp.asarray(centre + radius))
  final, total, states = run(cell, cell.input_gates(box), lengths)
  for _ in range(20):
    x = jnp.asarray(centre + radius * rng.uniform(-1, 1, size=centre.shape).astype(np.float32))
    point = run(cell, cell.input_gates(x), lengths)
    for concrete, bound in zip(point, (final, total, states)):
      assert np.all(bound.lo <= concrete) and np.all(concrete <= bound.hi)


def test_the_registry_names_its_cells():
  assert {"lstm", "gru"} <= set(CELLS)
  with pytest.raises(ValueError, match=r"Unknown cell 'rnn'; choose one of \['gru', 'lstm'"):
    LSTMClassifier(np.zeros((3, 2)), hidden=2, projection=2, head_hidden=2, cell="rnn",
                   rngs=nnx.Rngs(0))
