"""The experiment configs (``get_config(arg)`` per file), shipped with the package so that an
installed ``arc-train --config NAME.py[:ARG]`` finds them; experiments/configs/ re-exports them
for ``--config experiments/configs/NAME.py`` in a checkout. See experiments/README.md."""
