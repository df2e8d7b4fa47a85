"""The optimiser of the jitted steps (arc_jax.train.steps)."""

import jax.numpy as jnp
import numpy as np
import optax

from arc_jax.train import make_optimizer


def test_optimizer_clips_then_adds_coupled_weight_decay_then_adam():
  lr, wd, clip = 0.1, 0.01, 0.25
  params = {"w": jnp.array([1.0, -2.0]), "b": jnp.array([0.5])}
  grads = {"w": jnp.array([3.0, 4.0]), "b": jnp.array([0.0])}
  tx = make_optimizer(lr, wd, clip)
  updates, _ = tx.update(grads, tx.init(params), params)
  norm = np.sqrt(25.0)
  for k in params:  # torch: g ← clip(g); g ← g + wd·p; Adam's first step moves by lr·sign(g)
    g = np.asarray(grads[k]) * clip / norm + wd * np.asarray(params[k])
    expected = -lr * g / (np.abs(g) + 1e-8)
    np.testing.assert_allclose(updates[k], expected, rtol=1e-5)


def test_adagrad_is_torchs_after_clipping_and_coupled_weight_decay():
  lr, wd, clip = 0.05, 1e-2, 0.25
  params = {"w": jnp.array([1.0, -2.0])}
  tx = make_optimizer(lr, wd, clip, "adagrad")
  state = tx.init(params)
  p, accumulated = np.array([1.0, -2.0]), np.zeros(2)
  for g in ([3.0, 4.0], [0.1, -0.05]):  # the first is clipped, the second is not
    updates, state = tx.update({"w": jnp.array(g)}, state, params)
    params = optax.apply_updates(params, updates)
    g = np.array(g) * min(1.0, clip / np.linalg.norm(g)) + wd * p  # torch: clip, then + wd·p
    accumulated += g ** 2
    p = p - lr * g / (np.sqrt(accumulated) + 1e-10)
    np.testing.assert_allclose(params["w"], p, rtol=1e-5)



def test_embedding_group_gets_scaled_learning_rate_and_no_weight_decay():
  lr, wd, clip, scale = 0.05, 1e-2, 10.0, 0.1
  params = {"embeddings": jnp.array([1.0, -2.0]), "w": jnp.array([1.0, -2.0])}
  grads = {"embeddings": jnp.array([0.3, 0.4]), "w": jnp.array([0.3, 0.4])}
  tx = make_optimizer(lr, wd, clip, "adagrad", embedding_lr_scale=scale)
  updates, _ = tx.update(grads, tx.init(params), params)
  for name, rate, decay in (("embeddings", scale * lr, 0.0), ("w", lr, wd)):
    g = np.asarray(grads[name]) + decay * np.asarray(params[name])  # Adagrad's first step
    np.testing.assert_allclose(updates[name], -rate * g / (np.abs(g) + 1e-10), rtol=1e-5)
  one_group = make_optimizer(lr, wd, clip, "adagrad")
  plain, _ = one_group.update(grads, one_group.init(params), params)
  assert not np.allclose(plain["embeddings"], updates["embeddings"])
