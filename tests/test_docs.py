"""The API reference builds without a warning (``python docs/build.py``, docs/README.md), and a
docstring's bad cross-reference or a warning of pdoc fails the build.

The builds run in subprocesses: docs/build.py adjusts a few objects for pdoc in its own process
(docs/build.py ``prepare``)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "docs" / "build.py"

if not os.environ.get("CI"):  # CI installs requirements.txt, which pins pdoc: never skipped there
  pytest.importorskip("pdoc")


def build(args, cwd, env=None, code=None):
  command = [sys.executable, str(BUILD), *args] if code is None else [sys.executable, "-c", code]
  return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300,
                        check=False, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def test_the_api_reference_builds_without_a_warning(tmp_path):
  done = build(["--output", str(tmp_path / "api")], cwd=tmp_path)
  assert done.returncode == 0, done.stderr[-5000:]
  assert done.stderr == "", done.stderr[-5000:]
  pages = {p.relative_to(tmp_path / "api").as_posix() for p in (tmp_path / "api").rglob("*.html")}
  # Every public module has its page, also those a package's __all__ leaves out.
  assert {"index.html", "arc_jax.html", "arc_jax/parallel.html", "arc_jax/cli/common.html",
          "arc_jax/certify/api.html", "arc_jax/train/families/base.html"} <= pages
  parallel = (tmp_path / "api" / "arc_jax" / "parallel.html").read_text()
  # A Sphinx ~reference links and shows its last name; a short name imported from another
  # module links to the definition's page.
  assert '<a href="perturbation/trees.html#TreeBatch"><code>TreeBatch</code></a>' in parallel
  api = (tmp_path / "api" / "arc_jax" / "certify" / "api.html").read_text()
  assert '<a href="certificate.html#Certificate"><code>Certificate</code></a>' in api


DEMO = '''
"""A demo package. {reference}"""

__all__ = {all}


def fine():
  """Refers to :func:`jax.jit`, :class:`ValueError` and :func:`fine` itself."""
'''


@pytest.mark.parametrize("reference, names, warning", [
    (":func:`demo.no_such_function`", ["fine"],
     "demo: :func:`demo.no_such_function`: no such object"),
    (":class:`fine`", ["fine"], None),  # a wrong role still links: Sphinx warns neither
    (":ref:`a-label`", ["fine"], "demo: :ref:`a-label`: pdoc does not render the :ref: role"),
    ("", ["fine", "missing"], "Found 'missing' in demo.__all__, but it does not resolve"),
])
def test_a_bad_reference_or_a_warning_of_pdoc_fails_the_build(tmp_path, reference, names,
                                                              warning):
  (tmp_path / "demo").mkdir()
  (tmp_path / "demo" / "__init__.py").write_text(
      textwrap.dedent(DEMO).format(reference=reference, all=names))
  code = "import sys, build; build.PACKAGE = 'demo'; sys.exit(build.main(['--output', 'api']))"
  path = os.pathsep.join(map(str, (tmp_path, BUILD.parent, REPO)))
  done = build([], cwd=tmp_path, code=code, env={"PYTHONPATH": path})
  assert (tmp_path / "api" / "demo.html").is_file(), done.stderr[-3000:]
  if warning is None:
    assert (done.returncode, done.stderr) == (0, ""), done.stderr[-3000:]
  else:
    assert done.returncode == 1, done.stderr[-3000:]
    assert f"docs/build.py: warning: {warning}" in done.stderr, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1].endswith("warnings; the build fails on any")
