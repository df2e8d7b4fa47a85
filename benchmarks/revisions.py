"""Side-by-side measurements of two revisions of the repository in one run.

``--baseline REV`` in a benchmark checks REV out into a temporary ``git worktree`` and runs the
benchmark's own measuring code twice per round, as a subprocess with ``PYTHONPATH`` pointing at
REV and at this checkout in turn (same interpreter, same flags, same load), so a speed-up is a
ratio measured in one run. The measuring code must use only APIs both revisions have.
:func:`interleaved` goes further: both revisions stay alive and alternate pass by pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
from typing import Callable

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


def _child_env(code_root: pathlib.Path, label: str) -> dict:
  return dict(os.environ, PYTHONPATH=str(code_root), ARC_JAX_REVISION=label)


def run_child(script: str, args: list[str], code_root: pathlib.Path, label: str) -> list[dict]:
  """Runs ``script args --child`` importing ``arc_jax`` from ``code_root``; its JSON lines."""
  proc = subprocess.run([sys.executable, script, *args, "--child"],
                        env=_child_env(code_root, label), check=True,
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


def _json_line(proc: subprocess.Popen) -> dict:
  """The child's next JSON line on stdout (other lines skipped)."""
  for line in proc.stdout:
    if line.startswith("{"):
      return json.loads(line)
  raise RuntimeError(f"the benchmark child {proc.args} ended (exit {proc.wait()}) mid-protocol")


def interleaved(script: str, argv: list[str], baseline: str, pairs: int, items: list[str]
                ) -> tuple[list[dict], list[dict]]:
  """Timed passes of ``baseline`` and this checkout taken in alternation, both kept alive.

  Each child (``script args --child --serve``) prepares and compiles everything, one child after
  the other so neither compiles under the other's load, and prints ``{"ready": true}``. Then for
  each of ``pairs`` rounds and each item the parent asks both children for one pass (the item on
  a line of their stdin, one JSON line back), the revision that goes first flipping every round.
  A ratio of two paired passes carries the machine's drift over seconds, not over the minutes
  between two sequential runs (±15–20% on the shared 2-core machines). When their stdin closes,
  the children print their result lines.

  Returns (passes, results): every pass line with its ``item``, ``revision`` and ``pair`` index,
  and the children's closing lines with their ``revision``. The child side is
  :func:`serve_passes`.
  """
  args = strip_flag(strip_flag(argv, "--baseline", True), "--pairs", True)
  passes, results = [], []
  with checkout(baseline) as base, contextlib.ExitStack() as stack:
    children = {}
    for label, root in ((baseline, base), ("current", ROOT)):
      proc = stack.enter_context(subprocess.Popen(
          [sys.executable, script, *args, "--child", "--serve"], env=_child_env(root, label),
          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
      children[label] = proc
      while not _json_line(proc).get("ready"):
        pass
    for pair in range(pairs):
      for item in items:
        for label in list(children)[::1 if pair % 2 == 0 else -1]:
          proc = children[label]
          proc.stdin.write(item + "\n")
          proc.stdin.flush()
          passes.append({**_json_line(proc), "item": item, "revision": label, "pair": pair})
    for label, proc in children.items():
      proc.stdin.close()
      results += [{**json.loads(line), "revision": label} for line in proc.stdout
                  if line.startswith("{")]
      if proc.wait():
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
  return passes, results


def serve_passes(run: Callable[[str], tuple[float, float]]) -> dict[str, list[tuple[float, float]]]:
  """The child side of :func:`interleaved`, once it has compiled: prints ``{"ready": true}``,
  then for each line of stdin (an item) runs ``run(item)`` and prints its (seconds, CPU seconds)
  as one JSON line; when stdin closes, returns every item's passes in order."""
  print(json.dumps({"ready": True}), flush=True)
  timed = {}
  for item in map(str.strip, sys.stdin):
    seconds, cpu_seconds = run(item)
    timed.setdefault(item, []).append((seconds, cpu_seconds))
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds}), flush=True)
  return timed


def paired_ratios(passes: list[dict], baseline: str) -> dict:
  """``paired_ratio`` and ``paired_cpu_ratio``: median, least and largest of the baseline's
  seconds (CPU seconds) over the current revision's, over the pairs of :func:`interleaved`
  ``passes`` (>1: the current revision is faster); empty without passes."""
  out = {}
  for key, name in (("seconds", "paired_ratio"), ("cpu_seconds", "paired_cpu_ratio")):
    pairs = {}
    for p in passes:
      pairs.setdefault(p["pair"], {})[p["revision"]] = p[key]
    ratios = [p[baseline] / p["current"] for p in pairs.values()]
    if ratios:
      out[name] = {"median": round(float(statistics.median(ratios)), 3),
                   "min": round(min(ratios), 3), "max": round(max(ratios), 3),
                   "pairs": len(ratios)}
  return out


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
