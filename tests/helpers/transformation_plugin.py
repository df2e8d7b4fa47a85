"""A user module that registers a transformation when imported, as ``config.plugins`` names one
(tests/perturbation/test_plugins.py)."""

from arc_jax import custom, register_transformation

SWAP = register_transformation("TestSwap", custom(
    "TestSwap", 2, 2, match=lambda w: w[0] != w[1], replace=lambda w: [(w[1], w[0])]))
