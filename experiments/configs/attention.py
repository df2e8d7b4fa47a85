"""``--config experiments/configs/attention.py[:ARG]``: the config of arc_jax/configs/attention.py."""

from arc_jax.configs.attention import *  # noqa: F401,F403
