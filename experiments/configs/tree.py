"""``--config experiments/configs/tree.py[:ARG]``: the config of arc_jax/configs/tree.py."""

from arc_jax.configs.tree import *  # noqa: F401,F403
