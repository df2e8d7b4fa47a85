"""``--config experiments/configs/imdb.py[:ARG]``: the config of arc_jax/configs/imdb.py."""

from arc_jax.configs.imdb import *  # noqa: F401,F403
