"""``python experiments/report.py [DIR ...] [--output FILE]``: the ``arc-report`` command
(arc_jax/cli/report.py) in a checkout."""

import sys

from arc_jax.cli.report import main, markdown, rows, space_key  # noqa: F401

if __name__ == "__main__":
  sys.exit(main())
