"""Curriculum schedules (arc_jax.train.schedules)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arc_jax.train import epoch_ramp


@pytest.mark.parametrize("ramp", [1, 2, 5, 16])
def test_epoch_ramp_is_the_original_linspace_per_epoch(ramp):
  steps_per_epoch, epochs = 7, 24
  schedule = epoch_ramp(0.0, 0.5, ramp, steps_per_epoch)
  expected = np.concatenate([np.linspace(0.0, 0.5, ramp), np.full(epochs - ramp, 0.5)])
  for epoch in range(epochs):
    values = [float(schedule(epoch * steps_per_epoch + i)) for i in (0, steps_per_epoch - 1)]
    np.testing.assert_allclose(values, expected[epoch], atol=1e-7)


def test_epoch_ramp_without_ramp_starts_at_peak_and_is_jittable():
  schedule = epoch_ramp(0.2, 0.9, 0, 3)
  assert float(jax.jit(schedule)(jnp.int32(0))) == pytest.approx(0.9)
  assert epoch_ramp(0.2, 0.9, 0, 3) is schedule
