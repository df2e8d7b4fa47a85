"""Flax NNX layers that accept plain arrays or abstract values of a domain.

Every layer routes its arithmetic through the operations of a :class:`~arc_jax.domain.Domain`
(the ``domain`` argument, static; default the sound interval domain), whose rules take either
kind of value, so the concrete model and its abstract semantics share one code path and one set
of parameters: on plain arrays every rule computes the concrete operation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from arc_jax import interval as iv
from arc_jax.domain import Domain
from arc_jax.nn.recurrent import register_cell

Value = iv.Value


def torch_uniform_init(fan_in: int):
  """PyTorch's default ``nn.Linear`` init, U(±1/√fan_in), as in the original models."""
  bound = 1.0 / jnp.sqrt(fan_in)

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init


class Dense(nnx.Module):
  """``y = x @ kernel + bias`` on arrays or intervals (sound by :func:`arc_jax.interval.linear`)."""

  def __init__(self, in_features: int, out_features: int, *, rngs: nnx.Rngs,
               param_dtype=jnp.float32):
    init = torch_uniform_init(in_features)
    self.kernel = nnx.Param(init(rngs.params(), (in_features, out_features), param_dtype))
    self.bias = nnx.Param(init(rngs.params(), (out_features,), param_dtype))

  def __call__(self, x: Value, domain: Domain = iv.SOUND) -> Value:
    return domain.linear(x, self.kernel[...], self.bias[...])


class Projection(nnx.Module):
  """The original's input projection: Linear 300→100, then ReLU.

  ``pre_activation`` is exposed because substitution hulls are taken after the linear map and
  before the ReLU (tighter than hulling raw embeddings; docs/ALGORITHM.md §3).
  """

  def __init__(self, in_features: int, out_features: int, *, rngs: nnx.Rngs,
               param_dtype=jnp.float32):
    self.linear = Dense(in_features, out_features, rngs=rngs, param_dtype=param_dtype)

  def pre_activation(self, x: Value, domain: Domain = iv.SOUND) -> Value:
    return self.linear(x, domain)

  def __call__(self, x: Value, domain: Domain = iv.SOUND) -> Value:
    return domain.monotone(jax.nn.relu, self.linear(x, domain))


@register_cell("lstm")
class LSTMCell(nnx.Module):
  """LSTM cell with the original's gate layout ``[i | f | o | g]`` and two biases; carry (h, c)
  (:class:`~arc_jax.nn.recurrent.RecurrentCell`).

  i, f, o = σ(·), g = tanh(·) of ``W_ih x + b_ih + W_hh h + b_hh``; c' = f·c + i·g; h' = o·tanh(c').
  Each step is sound for intervals because it composes sound rules: affine maps, monotone
  activations, interval products and sums.

  The step is split into :meth:`input_gates` (depends on the input only, so the DP computes it
  for every position and replacement in one batched matmul outside its scan) and :meth:`step`.
  """

  carry_size = 2

  def __init__(self, in_features: int, hidden: int, *, rngs: nnx.Rngs, param_dtype=jnp.float32):
    self.hidden = hidden
    self.i2h = Dense(in_features, 4 * hidden, rngs=rngs, param_dtype=param_dtype)
    self.h2h = Dense(hidden, 4 * hidden, rngs=rngs, param_dtype=param_dtype)

  def input_gates(self, x: Value, domain: Domain = iv.SOUND) -> Value:
    """``W_ih x + b_ih``: (..., in_features) → (..., 4·hidden)."""
    return self.i2h(x, domain)

  def recurrent(self, h: Value, domain: Domain = iv.SOUND) -> Value:
    """``W_hh h + b_hh``: (..., hidden) → (..., 4·hidden).

    Separate from :meth:`step` so the DP computes it once for every branch that reads the same
    source states (a box's affine image is computed row by row, so slicing it afterwards gives
    the image of the slice).
    """
    return self.h2h(h, domain)

  def step(self, carry: tuple[Value, Value], gates_in: Value, recurrent: Value | None = None,
           domain: Domain = iv.SOUND) -> tuple[Value, Value]:
    """One step from ``(h, c)`` (each (..., hidden)) given the input's gate pre-activations.

    ``recurrent`` is :meth:`recurrent` of ``h`` when the caller has it already; the rest of the
    cell is the domain's :meth:`~arc_jax.domain.Domain.lstm_update`.
    """
    h, c = carry
    if hasattr(domain, "lstm_step"):  # the domain bounds the whole step (Domain's optional op)
      return domain.lstm_step(carry, gates_in, recurrent, self.h2h.kernel[...],
                              self.h2h.bias[...])
    recurrent = self.recurrent(h, domain) if recurrent is None else recurrent
    return domain.lstm_update(gates_in, recurrent, c)

  def __call__(self, carry, x, domain: Domain = iv.SOUND):
    return self.step(carry, self.input_gates(x, domain), domain=domain)


def dropout(x: Value, rate: float, key: jax.Array | None, domain: Domain = iv.SOUND) -> Value:
  """Inverted dropout with one mask for both ends of an interval (sound: a nonnegative scale).

  ``key=None`` (evaluation, certification) is the identity.
  """
  if key is None or rate == 0.0:
    return x
  keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
  return domain.scale(x, keep.astype(x.dtype) / (1.0 - rate))
