"""``python experiments/report.py [DIR ...] [--output FILE] [--paper FILE]``: the ``arc-report``
command (arc_jax/cli/report.py) in a checkout, with the paper's numbers (experiments/paper.py)
beside the measured ones unless ``--paper`` names another table."""

import sys
from pathlib import Path

from arc_jax.cli import report
from arc_jax.cli.report import load_paper, markdown, rows, space_key  # noqa: F401

PAPER_FILE = Path(__file__).resolve().parent / "paper.py"


def main(argv=None) -> int:
  """``arc-report``'s main with ``--paper experiments/paper.py`` unless ``argv`` names one."""
  argv = list(sys.argv[1:] if argv is None else argv)
  if not any(a == "--paper" or a.startswith("--paper=") for a in argv):
    argv += ["--paper", str(PAPER_FILE)]
  return report.main(argv)


if __name__ == "__main__":
  sys.exit(main())
