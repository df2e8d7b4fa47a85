"""The GRU cell (PyTorch's ``nn.GRU`` equations), registered as ``cell="gru"``.

    r = σ(W_ir x + b_ir + W_hr h + b_hr)      z = σ(W_iz x + b_iz + W_hz h + b_hz)
    n = tanh(W_in x + b_in + r · (W_hn h + b_hn))      h' = z · h + z̄ · n,   z̄ = σ(−(z's argument))

z̄ is 1 − z (σ(−a) = 1 − σ(a)), computed as a sigmoid of the negated pre-activation so that
every operation of the step is one of the domain's monotone, sum and product rules: the affine
maps produce the gate layout ``[r | z | z̄ | n]``, the z̄ columns being the z columns' exact
negation. In an abstract domain z and z̄ are bounded separately: sound, though the boxes do not
record that their sum is 1 on every concrete input.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from arc_jax import interval as iv
from arc_jax.domain import Domain, split
from arc_jax.nn.cells import Dense
from arc_jax.nn.recurrent import Carry, register_cell

Value = iv.Value


def _with_complement(x: jnp.ndarray, hidden: int) -> jnp.ndarray:
  """[r | z | n] along the last axis → [r | z | −z | n] (negation is exact)."""
  r, z, n = (x[..., i * hidden:(i + 1) * hidden] for i in range(3))
  return jnp.concatenate([r, z, -z, n], axis=-1)


@register_cell("gru")
class GRUCell(nnx.Module):
  """GRU cell (module docstring); carry (h,). Parameters in PyTorch's ``[r | z | n]`` layout:
  ``i2h`` (in, 3H) and ``h2h`` (H, 3H), each with its bias."""

  carry_size = 1

  def __init__(self, in_features: int, hidden: int, *, rngs: nnx.Rngs, param_dtype=jnp.float32):
    self.hidden = hidden
    self.i2h = Dense(in_features, 3 * hidden, rngs=rngs, param_dtype=param_dtype)
    self.h2h = Dense(hidden, 3 * hidden, rngs=rngs, param_dtype=param_dtype)

  def _affine(self, dense: Dense, x: Value, domain: Domain) -> Value:
    return domain.linear(x, _with_complement(dense.kernel[...], self.hidden),
                         _with_complement(dense.bias[...], self.hidden))

  def input_gates(self, x: Value, domain: Domain = iv.SOUND) -> Value:
    """``W_i x + b_i`` in the layout [r | z | z̄ | n]: (..., in_features) → (..., 4·hidden)."""
    return self._affine(self.i2h, x, domain)

  def recurrent(self, h: Value, domain: Domain = iv.SOUND) -> Value:
    """``W_h h + b_h`` in the layout [r | z | z̄ | n]: (..., hidden) → (..., 4·hidden)."""
    return self._affine(self.h2h, h, domain)

  def step(self, carry: Carry, gates_in: Value, recurrent: Value | None = None,
           domain: Domain = iv.SOUND) -> Carry:
    """One step from ``(h,)`` (..., hidden). Sound in every domain: it composes the domain's
    rules only; r, z, z̄ are sigmoids, hence non-negative, so their products use
    ``mul_nonneg``."""
    d = domain
    (h,) = carry
    recurrent = self.recurrent(h, d) if recurrent is None else recurrent
    i_r, i_z, i_zbar, i_n = split(gates_in, 4)
    h_r, h_z, h_zbar, h_n = split(recurrent, 4)
    r, z, zbar = (d.monotone(jax.nn.sigmoid, d.add(a, b))
                  for a, b in ((i_r, h_r), (i_z, h_z), (i_zbar, h_zbar)))
    n = d.monotone(jnp.tanh, d.add(i_n, d.mul_nonneg(r, h_n)))
    return (d.add(d.mul_nonneg(z, h), d.mul_nonneg(zbar, n)),)

  def __call__(self, carry, x, domain: Domain = iv.SOUND):
    return self.step(carry, self.input_gates(x, domain), domain=domain)

