"""``--config experiments/configs/a3t_cnn.py[:ARG]``: the config of arc_jax/configs/a3t_cnn.py."""

from arc_jax.configs.a3t_cnn import *  # noqa: F401,F403
