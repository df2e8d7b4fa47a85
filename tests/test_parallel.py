"""Concurrent evaluation batches (:func:`arc_jax.parallel.ordered_map`): results in order, the
calls really overlap, and certification and evaluation give the same answers either way."""

import threading
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from arc_jax import parallel
from arc_jax.certify import certify
from arc_jax.data.trees import from_nested
from arc_jax.nn import LSTMClassifier
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation import parse_space
from arc_jax.train import evaluate_split


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_ordered_map_keeps_the_order_of_calls_that_finish_out_of_order(workers):
  # Earlier items sleep longer, so with several workers later calls finish first.
  def slow(i):
    time.sleep(0.02 * (10 - i) if workers > 1 else 0)
    return i * i

  assert list(parallel.ordered_map(slow, range(10), workers)) == [i * i for i in range(10)]


def test_ordered_map_runs_two_calls_at_once_and_never_more():
  barrier = threading.Barrier(2, timeout=10)  # broken (raises) unless two calls meet
  lock, running, most = threading.Lock(), [0], [0]

  def meet(i):
    with lock:
      running[0] += 1
      most[0] = max(most[0], running[0])
    barrier.wait()
    time.sleep(0.01)
    with lock:
      running[0] -= 1
    return i

  assert list(parallel.ordered_map(meet, range(6), 2)) == list(range(6))
  assert most[0] == 2


def test_ordered_map_takes_items_while_calls_run():
  """The calling thread builds the next item while the calls run: items are taken ahead."""
  taken, started = [], threading.Event()

  def items():
    for i in range(4):
      taken.append(i)
      yield i

  def call(i):
    started.set()
    time.sleep(0.05)
    return len(taken)

  seen = list(parallel.ordered_map(call, items(), 2))
  assert started.is_set() and seen[0] >= 2  # item 1 was taken before call 0 ended


def test_ordered_map_runs_calls_under_the_callers_jax_settings():
  """A ``with`` context of JAX settings holds for its thread alone: without carrying them over,
  a certification under ``jax.enable_x64(True)`` ran in float32 in the worker threads."""
  seen = lambda i: (jnp.ones(1).dtype, jax.config.jax_default_matmul_precision,
                    jax.config.jax_numpy_rank_promotion)
  with jax.enable_x64(True), jax.default_matmul_precision("highest"), \
      jax.numpy_rank_promotion("raise"):
    inside = list(parallel.ordered_map(seen, range(4), 2))
  assert inside == [(np.dtype("float64"), "highest", "raise")] * 4
  assert list(parallel.ordered_map(seen, range(2), 2))[0][0] == np.dtype("float32")


def test_one_cpu_device_runs_two_calls_at_once_and_a_mesh_of_several_one():
  assert parallel.concurrent_calls() == 2  # the suite runs on one CPU device
  assert parallel.concurrent_calls(parallel.data_mesh()) == 2
  device = jax.devices()[0]
  several = types.SimpleNamespace(devices=np.array([device, device]))  # collectives: in order
  assert parallel.concurrent_calls(several) == 1


WORDS = ("<pad>", "a", "the", "good", "fine", "bad", "movie", "film")
VOCAB = {w: i for i, w in enumerate(WORDS)}


def _sentences(n, seed=0):
  rng = np.random.default_rng(seed)
  return [list(rng.choice(WORDS[1:], size=rng.integers(1, 9))) for _ in range(n)]


def _same(a, b):
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_certify_sentences_gives_the_same_certificates_two_batches_at_a_time(
    monkeypatch, bidirectional):
  model = LSTMClassifier(np.random.default_rng(1).normal(size=(len(WORDS), 6)) * 2, hidden=5,
                         projection=4, bidirectional=bidirectional, rngs=nnx.Rngs(0))
  space = parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["fine"], "movie": ["film"]})
  sentences = _sentences(23)
  labels = np.random.default_rng(2).integers(0, 2, 23)
  together = certify(model, space, sentences, labels, VOCAB, batch_size=4)
  with jax.enable_x64(True):  # a float64 model under the caller's x64 context
    wide = LSTMClassifier(np.random.default_rng(1).normal(size=(len(WORDS), 6)) * 2, hidden=5,
                          projection=4, bidirectional=bidirectional, rngs=nnx.Rngs(0),
                          param_dtype=jnp.float64)
    wide_together = certify(wide, space, sentences, labels, VOCAB, batch_size=4)
  assert wide_together["margins"].dtype == np.float64
  monkeypatch.setattr(parallel, "concurrent_calls", lambda mesh=None: 1)
  _same(certify(model, space, sentences, labels, VOCAB, batch_size=4), together)
  with jax.enable_x64(True):
    _same(certify(wide, space, sentences, labels, VOCAB, batch_size=4), wide_together)


def test_certify_trees_gives_the_same_certificates_two_batches_at_a_time(monkeypatch):
  model = TreeLSTMClassifier(np.random.default_rng(3).normal(size=(len(WORDS), 6)), hidden=5,
                             rngs=nnx.Rngs(0))
  space = parse_space("[(Sub,1)]", synonyms={"good": ["fine"], "movie": ["film"]})
  trees = [from_nested(t) for t in (("a", ("good", "movie")), "film", ("bad", "movie"),
                                    (("the", "good"), ("fine", "film")), ("a", "bad"))]
  labels = [0, 4, 1, 3, 2]
  together = certify(model, space, trees, labels, VOCAB, batch_size=2)
  monkeypatch.setattr(parallel, "concurrent_calls", lambda mesh=None: 1)
  _same(certify(model, space, trees, labels, VOCAB, batch_size=2), together)


def test_evaluate_split_places_each_batch_whatever_the_workers():
  class Batch:
    def __init__(self, indices):
      self.indices = np.asarray(indices)

  batches = [Batch([4, 0, -1]), Batch([2, 5, 1]), Batch([3, -1, -1])]
  step = lambda params, rest, b: {"correct": np.asarray(b) % 2 == 0}  # even index: correct
  outcomes = [evaluate_split(step, None, None, batches, 6, lambda b: b.indices, workers=w)
              for w in (1, 2)]
  expected = np.arange(6) % 2 == 0
  for flags in outcomes:
    np.testing.assert_array_equal(flags["correct"], expected)
