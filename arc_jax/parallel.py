"""Data parallelism with ``jax.sharding``: one mesh axis over the devices, batches split along it.

Parameters and optimiser state are replicated; every batch array (token ids, labels, weights
and the DP plan) is sharded along its leading (batch) axis. ``jax.jit`` then runs the whole step
on every device and inserts the gradient all-reduce itself. The same code runs on one device,
on all local devices, and on several hosts after ``jax.distributed.initialize()`` (the mesh
spans ``jax.devices()``, the global device list; see :func:`put`).

Independent calls (evaluation batches) can also run side by side on one CPU device
(:func:`concurrent_calls`, :func:`ordered_map`), where XLA leaves a core idle during most of
the interval DP's elementwise work.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
from typing import Any, Callable, Iterable, Iterator, Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"


def data_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A 1-D mesh with axis ``"data"`` over ``devices`` (default: every device, all hosts)."""
  devices = list(jax.devices() if devices is None else devices)
  return jax.make_mesh((len(devices),), (DATA_AXIS,), axis_types=(AxisType.Auto,),
                       devices=devices)


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())


def batch_sharded(mesh: Mesh) -> NamedSharding:
  """Leading axis split over the devices, other axes whole."""
  return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def check_batch_size(batch_size: int, mesh: Mesh, name: str = "batch_size") -> None:
  """Raises ValueError unless the devices split ``batch_size`` rows evenly."""
  if batch_size % mesh.size:
    multiple = -(-batch_size // mesh.size) * mesh.size
    raise ValueError(f"config.{name}={batch_size} is not a multiple of the {mesh.size} devices "
                     f"of the mesh; use a multiple of {mesh.size} (e.g. "
                     f"--config.{name}={multiple}).")


def put(tree: Any, sharding: NamedSharding) -> Any:
  """Host values → global ``jax.Array`` s laid out by ``sharding``.

  Every process passes the same global values (the trainer builds each batch identically on
  every host); each materialises only the slices its own devices hold, so on several hosts each
  host feeds its shard of the batch.
  """
  def one(x):
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

  return jax.tree.map(one, tree)


def gathered(x: jax.Array) -> jax.Array | np.ndarray:
  """A global array's whole value on this host: ``x`` itself on one process (still computing,
  so the caller can prepare its next batch meanwhile; ``np.asarray`` waits for it), else
  gathered from every process (numpy)."""
  return x if jax.process_count() == 1 else multihost_utils.process_allgather(x, tiled=True)


def put_trees(trees: Any, mesh: Mesh) -> Any:
  """A :class:`~arc_jax.perturbation.trees.TreeBatch` on ``mesh``: every (B, ...) array split
  along its rows, the schedule (flat ids over all trees) whole on every device."""
  rows = put(dataclasses.replace(trees, schedule=None), batch_sharded(mesh))
  return dataclasses.replace(rows, schedule=put(trees.schedule, replicated(mesh)))


def concurrent_calls(mesh: Mesh | None = None) -> int:
  """How many independent jitted calls (evaluation batches) to keep running at once on ``mesh``
  (None: the default device alone, where unsharded calls run).

  2 on one CPU device of a single process, else 1. XLA on CPU runs a call's matmuls on every
  core but most of the interval DP's elementwise fusions on one; two calls at once fill the idle
  cores (``benchmarks/certify_throughput.py``; the measurement is in benchmarks/README.md;
  more than 2 gained nothing). Accelerators run
  their calls in order anyway, and on several devices or hosts every device must see the
  collectives of its calls in the same order, which calls from several threads do not ensure.
  """
  devices = jax.devices()[:1] if mesh is None else list(mesh.devices.flat)
  cpu = all(d.platform == "cpu" for d in devices)
  return 2 if cpu and len(devices) == 1 and jax.process_count() == 1 else 1


_THREAD_LOCAL_SETTINGS = (
    ("jax_enable_x64", jax.enable_x64),
    ("jax_default_matmul_precision", jax.default_matmul_precision),
    ("jax_default_device", jax.default_device),
    ("jax_numpy_dtype_promotion", jax.numpy_dtype_promotion),
    ("jax_numpy_rank_promotion", jax.numpy_rank_promotion),
    ("jax_default_prng_impl", jax.default_prng_impl),
    ("jax_debug_nans", jax.debug_nans),
    ("jax_debug_infs", jax.debug_infs),
    ("jax_disable_jit", jax.disable_jit))
"""The JAX settings that a ``with`` context sets for its thread alone and that change what a
call computes or where: (config name, context manager), carried into :func:`ordered_map`'s
threads."""


def ordered_map(fn: Callable[[Any], Any], items: Iterable, workers: int) -> Iterator[Any]:
  """``fn(item)`` for each item, yielded in order, with up to ``workers`` calls at once.

  With ``workers`` > 1 each call runs in a thread of its own, under the calling thread's JAX
  settings (:data:`_THREAD_LOCAL_SETTINGS`: a new thread would not see a ``jax.enable_x64``
  context of the caller and would compute in float32), and its result is waited for there
  (``jax.block_until_ready``); the next item is taken from ``items`` (built on the calling
  thread) while they run. With 1, the calls run on the calling thread and are not waited for
  (JAX's asynchronous dispatch).
  """
  if workers <= 1:
    yield from map(fn, items)
    return
  settings = [(context, getattr(jax.config, name)) for name, context in _THREAD_LOCAL_SETTINGS]

  def ready(item):
    with contextlib.ExitStack() as stack:
      for context, value in settings:
        stack.enter_context(context(value))
      return jax.block_until_ready(fn(item))

  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    running = collections.deque()
    for item in items:
      if len(running) == workers:
        yield running.popleft().result()
      running.append(pool.submit(ready, item))
    while running:
      yield running.popleft().result()
