"""``python experiments/certify.py --model RUN [FLAGS] [FILE | -]``: the ``arc-certify`` command
(arc_jax/cli/certify.py) in a checkout; ``--help`` lists the flags."""

import sys

from arc_jax.cli.certify import main

if __name__ == "__main__":
  sys.exit(main())
