"""``python experiments/evaluate.py --workdir RUN [FLAGS]``: the ``arc-evaluate`` command
(arc_jax/cli/evaluate.py) in a checkout; ``--help`` lists the flags."""

import sys

from arc_jax.cli.evaluate import main

if __name__ == "__main__":
  sys.exit(main())
