"""``--config experiments/configs/normal.py[:ARG]``: the config of arc_jax/configs/normal.py."""

from arc_jax.configs.normal import *  # noqa: F401,F403
