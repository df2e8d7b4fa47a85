"""Issue 42: the paper is one table outside the package (experiments/paper.py), and
experiments/reproduce.py is a short loop over it."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Distinctive numbers of the paper's tables (Tables 2, 3, 4, 5, ARC-A3T), as the table writes them.
PAPER_NUMBERS = ("(84.6, 71.9, 4.6, 68.9)", "(46.4, 43.4, 30.9, 41.9)", "(82.3, 78.1, 74.2, 77.1)",
                 "(80.2, 71.9, None, 70.2)", "(87.7, 77.8, 82.6)", "(83.2, None, 15.1, 68.6)",
                 "(83.3, 78.3, 73.3, 77.9)")


def test_no_module_of_the_package_holds_the_papers_numbers():
  for path in sorted((ROOT / "arc_jax").rglob("*.py")):
    text = path.read_text()
    assert "PAPER = {" not in text and "TABLES_2_3 = {" not in text, path
    for numbers in PAPER_NUMBERS:
      assert numbers not in text, (path, numbers)
  assert "PAPER" not in (ROOT / "arc_jax" / "cli" / "report.py").read_text()
  table = (ROOT / "experiments" / "paper.py").read_text()
  assert all(numbers in table for numbers in PAPER_NUMBERS)


def test_reproduce_is_a_short_loop_over_the_table():
  assert len((ROOT / "experiments" / "reproduce.py").read_text().splitlines()) < 250
