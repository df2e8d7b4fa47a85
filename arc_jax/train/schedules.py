"""The ARC curriculum as Optax schedules: λ (robust weight) and ε (hull scale) per step.

Semantics of the original (docs/ORIGINAL.md §5): in epoch t the value is
``linspace(start, peak, ramp_epochs)[t]`` for t < ramp_epochs and ``peak`` afterwards, constant
within an epoch. With the defaults (start 0, 16 ramp epochs of 24) epoch 0 has λ = 0 (clean
training, which the trainer runs without the DP), epoch 15 reaches the peak and epochs 15–23
hold it. A per-epoch staircase (rather than a per-step ramp) keeps this reference behaviour and
lets the trainer pick the cheap clean step for a whole epoch when λ = 0.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import optax


@functools.cache
def epoch_ramp(start: float, peak: float, ramp_epochs: int, steps_per_epoch: int
               ) -> optax.Schedule:
  """step ↦ ``linspace(start, peak, ramp_epochs)[min(step // steps_per_epoch, ramp_epochs − 1)]``.

  ``ramp_epochs`` ≤ 1 is a step from ``start`` (epochs < ramp_epochs) to ``peak``. The returned
  function is traceable (jit) and accepts Python or array steps; equal arguments return the same
  function (memoised, so jitted steps built on it are reused).
  """
  if steps_per_epoch < 1:
    raise ValueError(f"steps_per_epoch must be >= 1, got {steps_per_epoch}.")
  if ramp_epochs < 0:
    raise ValueError(f"ramp_epochs must be >= 0, got {ramp_epochs}.")

  def schedule(step):
    epoch = jnp.asarray(step) // steps_per_epoch
    if ramp_epochs <= 1:
      fraction = (epoch >= ramp_epochs).astype(jnp.float32)
    else:
      fraction = jnp.minimum(epoch / (ramp_epochs - 1), 1.0)
    return start + (peak - start) * fraction

  return schedule
