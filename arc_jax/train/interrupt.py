"""Clean stops on SIGINT (Ctrl-C) and SIGTERM (what cluster schedulers send before a kill).

The first signal only sets a flag (:class:`StopRequest`); the training loop polls it between steps
and evaluation batches, saves a checkpoint at the current step and returns, so no exception is
thrown through JAX (whose garbage-collection callbacks swallowed KeyboardInterrupt). A second
signal stops the process at once without saving, like a kill: the run resumes from its last
checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
  """Raised inside the loop (e.g. by an evaluation) to stop at the next safe point."""


class StopRequest:
  """Whether a stop signal arrived, and which (``signal`` is None until one does)."""

  def __init__(self):
    self.signal: int | None = None

  def __bool__(self) -> bool:
    return self.signal is not None

  @property
  def name(self) -> str:
    return signal.Signals(self.signal).name if self.signal else ""

  def raise_if_set(self) -> None:
    if self:
      raise Interrupted(self.name)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
  """Within the block, SIGINT and SIGTERM set the yielded :class:`StopRequest` (the first) or
  exit with status 128 + signal (the second). Outside the main thread it installs nothing."""
  request = StopRequest()
  if threading.current_thread() is not threading.main_thread():
    yield request
    return

  def handle(signum, frame):
    del frame
    if request.signal is None:
      request.signal = signum
      return
    print(f"{signal.Signals(signum).name} again: stopping without saving; the run resumes from "
          "its last checkpoint.", file=sys.stderr, flush=True)
    os._exit(128 + signum)

  previous = {s: signal.signal(s, handle) for s in STOP_SIGNALS}
  try:
    yield request
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)


@contextlib.contextmanager
def exit_on_signals(message: str) -> Iterator[None]:
  """Within the block, SIGINT and SIGTERM print ``<SIGNAL>: <message>`` and exit at once with
  status 128 + signal: for work that has nothing to save (loading data, an evaluation before it
  writes its results). A KeyboardInterrupt could be swallowed inside JAX's callbacks; this
  cannot. Outside the main thread it installs nothing."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  def handle(signum, frame):
    del frame
    print(f"{signal.Signals(signum).name}: {message}", file=sys.stderr, flush=True)
    os._exit(128 + signum)

  previous = {s: signal.signal(s, handle) for s in STOP_SIGNALS}
  try:
    yield
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
