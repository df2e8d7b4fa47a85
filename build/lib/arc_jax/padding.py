"""Helpers for right-padded batches of sequences."""

import jax
import jax.numpy as jnp


def reverse_padded(x: jax.Array, lengths: jax.Array, fill=0) -> jax.Array:
  """Reverses the first ``lengths[b]`` entries of each row of ``x`` (B, N, ...); pads get ``fill``.

  Pure jnp, usable under jit: row b becomes x[b, n-1], …, x[b, 0], fill, …, fill with n = lengths[b].
  """
  n_pad = x.shape[1]
  positions = jnp.arange(n_pad)[None, :]
  lengths = jnp.asarray(lengths)[:, None]
  src = jnp.clip(lengths - 1 - positions, 0, n_pad - 1)
  src = src.reshape(src.shape + (1,) * (x.ndim - 2))
  real = (positions < lengths).reshape(src.shape)
  return jnp.where(real, jnp.take_along_axis(jnp.asarray(x), src, axis=1), fill)
