"""``--config experiments/configs/hotflip.py[:ARG]``: the config of arc_jax/configs/hotflip.py."""

from arc_jax.configs.hotflip import *  # noqa: F401,F403
