"""``--config experiments/configs/a3t.py[:ARG]``: the config of arc_jax/configs/a3t.py."""

from arc_jax.configs.a3t import *  # noqa: F401,F403
