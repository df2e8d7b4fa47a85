"""``python experiments/train.py [FLAGS]``: the ``arc-train`` command (arc_jax/cli/train.py) in a
checkout; ``--help`` lists the flags and every config field."""

from arc_jax.cli.train import run

if __name__ == "__main__":
  run()
