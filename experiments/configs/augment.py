"""``--config experiments/configs/augment.py[:ARG]``: the config of arc_jax/configs/augment.py."""

from arc_jax.configs.augment import *  # noqa: F401,F403
