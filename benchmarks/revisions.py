"""Side-by-side measurements of two revisions of the repository in one run.

``--baseline REV`` in a benchmark checks REV out into a temporary ``git worktree`` and runs the
benchmark's own measuring code twice per round, as a subprocess with ``PYTHONPATH`` pointing at
REV and at this checkout in turn (same interpreter, same flags, same load), so a speed-up is a
ratio measured in one run. The measuring code must use only APIs both revisions have.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def checkout(rev: str):
  """A temporary worktree of ``rev`` (removed afterwards); yields its path."""
  path = pathlib.Path(tempfile.mkdtemp(prefix="arc_jax_baseline_")) / "tree"
  subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(path), rev],
                 check=True)
  try:
    yield path
  finally:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                   check=False)
    path.parent.rmdir()


def run_child(script: str, args: list[str], code_root: pathlib.Path, label: str) -> list[dict]:
  """Runs ``script args --child`` importing ``arc_jax`` from ``code_root``; its JSON lines."""
  env = dict(os.environ, PYTHONPATH=str(code_root), ARC_JAX_REVISION=label)
  proc = subprocess.run([sys.executable, script, *args, "--child"], env=env, check=True,
                        stdout=subprocess.PIPE, text=True)
  lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
  for line in lines:
    line["revision"] = label
  return lines


def side_by_side(script: str, argv: list[str], baseline: str, rounds: int) -> list[dict]:
  """Every child line of ``rounds`` alternating runs of ``baseline`` and this checkout, each
  given the parent's ``argv`` without ``--baseline`` and ``--rounds``."""
  args = strip_flag(strip_flag(argv, "--baseline", True), "--rounds", True)
  lines = []
  with checkout(baseline) as base:
    for _ in range(rounds):
      lines += run_child(script, args, base, baseline)
      lines += run_child(script, args, ROOT, "current")
  return lines


def strip_flag(argv: list[str], flag: str, takes_value: bool) -> list[str]:
  """``argv`` without ``flag`` (and its value): the arguments to pass on to the children."""
  out, skip = [], False
  for arg in argv:
    if skip:
      skip = False
    elif arg == flag:
      skip = takes_value
    elif not arg.startswith(flag + "="):
      out.append(arg)
  return out


def load() -> list[float]:
  """The 1, 5 and 15 minute load averages (the machines are shared)."""
  return [round(x, 2) for x in os.getloadavg()]
