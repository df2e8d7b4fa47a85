"""Certification entry points, one for every model family (they dispatch on the model's type):
:func:`certify_model` (a lowered batch), its jitted :data:`certify_jit` and pure
:func:`make_certify_fn`, and the convenience :func:`certify` (raw examples); and the checks and
the batching loop that the families' :func:`certify` functions share.

This module knows no model family: each family's module registers its certification with
``certify_model.register`` and ``certify.register`` when it is imported
(:mod:`arc_jax.certify.sequence`: LSTMs, Bi-LSTMs and attention; :mod:`arc_jax.certify.trees`:
Tree-LSTMs; both imported by the package :mod:`arc_jax.certify`, which any import of this module
runs first; the CNN's in :mod:`arc_jax.train.families.cnn`). A new model kind is one such module.
The names this module held before those modules (``certify_sentences``, ``certify_trees``,
``certification_order``, ...) are still readable here (:func:`moved_here`).

Each takes its abstract domain as a :class:`~arc_jax.domain.Domain` or by its registered name
(:mod:`arc_jax.domains`: ``domain="linear_step"``, with the domain's default settings)."""

from __future__ import annotations

import functools
import sys
from typing import Callable, Iterable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import domains
from arc_jax import interval as iv
from arc_jax import parallel
from arc_jax.certify.certificate import Certificate, CertifyResult
from arc_jax.domain import Domain
from arc_jax.perturbation.spaces import Space
from arc_jax.perturbation.split import SplitSpace
from arc_jax.xla_options import COMPILER_OPTIONS


@functools.singledispatch
def certify_model(model: nnx.Module, space, batch, labels: jax.Array,
                  eps: jax.Array | float = 1.0, dropout_key: jax.Array | None = None,
                  domain: Domain | str = iv.SOUND, **options) -> Certificate:
  """Certifies a batch with the DP of the model's family; differentiable in the model.

  Dispatches on the model's type: (Bi-)LSTMs to
  :func:`~arc_jax.certify.sequence.certify_sequence_model`, Tree-LSTMs to
  :func:`~arc_jax.certify.tree_dp.certify_tree_model` (its ``options``: ``budgets``, ``join``);
  ``certify_model.register(ModelType, fn)`` adds a family (as :mod:`arc_jax.certify.sequence`
  and :mod:`arc_jax.certify.trees` do).

  Args:
    model: the classifier.
    space: the space (or its signature) the batch was lowered for.
    batch: the lowered batch (a :class:`~arc_jax.perturbation.Plan` of sentences, a
      :class:`~arc_jax.perturbation.trees.TreeBatch` of trees).
    labels: int (B,), or (B, N) per node for Tree-LSTMs.
    eps: hull scale in [0, 1] (1 = the full space; smaller values are the training curriculum).
    dropout_key: applies the model's dropout (training); None for certification.
    domain: the abstract domain (static): :data:`arc_jax.interval.SOUND` (default) for a
      certificate that holds in floating point, :data:`arc_jax.interval.UNROUNDED` for the
      cheaper surrogate bounds of training objectives; or a registered name
      (:mod:`arc_jax.domains`), which
      :func:`~arc_jax.certify.sequence.certify_sequence_model`, :data:`certify_jit`,
      :func:`make_certify_fn` and :func:`certify` resolve (a family's own function may not).
    **options: the family's own (static or traced) arguments.
  """
  raise TypeError(f"No certification DP is registered for {type(model).__name__}: "
                  f"register one with certify_model.register({type(model).__name__}, fn).")


def _certify_state(graphdef, signature, state, batch, labels, eps=1.0, dropout_key=None, *,
                   domain=iv.SOUND, **options):
  states = state if isinstance(state, tuple) else (state,)
  return certify_model(nnx.merge(graphdef, *states), signature, batch, labels, eps, dropout_key,
                       domains.resolve(domain), **options)


STATIC_OPTIONS = ("join",)
"""The family options of :func:`certify_model` that select code (the tree DP's ``join``); the
others (the tree DP's ``budgets``) are traced. Fixed when :data:`certify_jit` is built: a family
with a new static option adds its name here."""

certify_jit = jax.jit(_certify_state, static_argnums=(0, 1),
                      static_argnames=("domain",) + STATIC_OPTIONS,
                      compiler_options=COMPILER_OPTIONS)
"""``certify_jit(graphdef, signature, state, batch, labels, eps=1.0, dropout_key=None, *,
domain=interval.SOUND, **options)``: the jitted :func:`certify_model`, cached across calls by
(graphdef, space signature, domain, static options, array shapes)."""


def make_certify_fn(graphdef: nnx.GraphDef, space, domain: Domain | str = iv.SOUND, **options
                    ) -> Callable[..., Certificate]:
  """A pure ``certify_fn(state, batch, labels, eps=1.0, dropout_key=None, **options) ->
  Certificate`` of any model family (:func:`certify_model`).

  Refuses a space given as a string, and float64 parameters while JAX's 64-bit mode is off.
  ``graphdef, state = nnx.split(model)`` once (or ``graphdef, params, rest =
  nnx.split(model, nnx.Param, ...)`` and pass ``state=(params, rest)`` to differentiate with
  respect to the parameters only). The returned function depends only on its arguments, so it can
  be wrapped in ``jax.jit``, ``jax.vmap`` and ``jax.grad``. ``domain`` (static) is the abstract
  domain of the DP, or its registered name (:mod:`arc_jax.domains`); ``options`` the family's (e.g. ``join`` for Tree-LSTMs).
  """
  check_space(space)
  domain = domains.resolve(domain)
  certify_fn = functools.partial(_certify_state, graphdef, space.signature, domain=domain,
                                 **options)

  def checked(state, *args, **kwargs):
    check_state(state)  # concrete leaves only: under a trace they are already canonical
    return certify_fn(state, *args, **kwargs)

  return checked


MAX_GRID_SLOTS = 1024
"""Default limit on a space's decomposition grid ∏(δ_k + 1) in :func:`certify` (the DP holds a
state box per slot; pass ``max_grid_slots`` to go beyond)."""


@functools.singledispatch
def grid_states(sig) -> int:
  """How many states the DP of a space with signature ``sig`` keeps at once, for the memory
  estimate of :func:`check_grid`: one per slot of the grid unless the signature's family
  registers its own (``grid_states.register``: a window of max s_k states per slot for sentences,
  :mod:`arc_jax.certify.sequence`; the P ≈ C²/2^m split pairs of a merge step for trees,
  :mod:`arc_jax.certify.trees`)."""
  return int(np.prod(sig.grid))


def check_grid(sig, space, batch_size: int, hidden: int, itemsize: int,
               max_grid_slots: int) -> None:
  """Refuses a space whose decomposition grid (``sig.grid`` of its signature ``sig``) exceeds
  ``max_grid_slots``, naming its size and an estimate of the DP's memory: a box (lo, hi) of
  (h, c) per row and hidden unit, for the :func:`grid_states` states the DP keeps at once."""
  slots = int(np.prod(sig.grid))
  if slots <= max_grid_slots:
    return
  states = grid_states(sig)
  gib = batch_size * states * hidden * 4 * itemsize / 2**30
  raise ValueError(
      f"The space {space} has a decomposition grid of {slots} slots "
      f"({'×'.join(map(str, sig.grid))}); certifying batches of {batch_size} needs about "
      f"{gib:.1f} GiB for the DP's state boxes. Lower the budgets or the batch size, or pass "
      f"max_grid_slots={slots} to proceed.")


def check_space(space) -> None:
  """Refuses a space given as its spec string (certification needs the parsed space, whose
  transformations hold their lexicons), and a split space (which
  :func:`arc_jax.certify.certify_split` certifies)."""
  if isinstance(space, str):
    raise ValueError(f"space is the string {space!r}, not a parsed space: pass "
                     f"arc_jax.perturbation.parse_space({space!r}, synonyms=..., stopwords=...).")
  if isinstance(space, SplitSpace):
    raise ValueError(f"space is the split space {space.space} (abstracted: "
                     f"{', '.join(space.abstracted) or 'none'}): certify it with "
                     "arc_jax.certify.certify_split, or pass its whole space (split.space).")


def check_state(state) -> None:
  """Refuses float64 arrays among the concrete leaves of ``state`` (a model, state or tuple of
  states) while JAX's 64-bit mode is off: JAX would compute them in float32 without a word."""
  if jax.dtypes.canonicalize_dtype(jnp.float64) == jnp.float64:
    return
  leaves = jax.tree.leaves(nnx.state(state) if isinstance(state, nnx.Module) else state)
  if any(getattr(leaf, "dtype", None) == np.float64 for leaf in leaves):
    raise ValueError("The model has float64 parameters, but JAX's 64-bit mode is off (JAX would "
                     "compute in float32): call jax.config.update('jax_enable_x64', True) at "
                     "startup, set JAX_ENABLE_X64=1, or cast the parameters to float32.")


def check_vocab(vocab: Mapping[str, int], rows: int) -> None:
  """Refuses a vocabulary with an id outside the embedding table's ``rows`` (the gather would
  read another word's vector)."""
  bad = next(((w, i) for w, i in vocab.items() if not 0 <= i < rows), None)
  if bad is not None:
    raise ValueError(f"The vocabulary maps {bad[0]!r} to id {bad[1]}, outside the model's "
                     f"embedding table of {rows} rows (ids 0..{rows - 1}): pass the vocabulary "
                     "the model was built with.")


def check_inputs(model: nnx.Module, space, vocab: Mapping[str, int]) -> None:
  """The checks of :func:`certify`'s inputs that cost nothing: the space parsed, no float64
  parameters without 64-bit mode, every vocabulary id a row of the embedding table."""
  check_space(space)
  check_state(model)
  check_vocab(vocab, model.embeddings[...].shape[0])


def check_examples(examples: Sequence, labels, num_classes: int, what: str, fix: str,
                   kind: type | None = None) -> np.ndarray | None:
  """Checks a list of examples (none a string; each a ``kind`` if given) and their labels (None:
  no labels given); returns the labels. ``what`` names an example, ``fix`` what to pass."""
  if isinstance(examples, str) or not len(examples):
    raise ValueError(f"No {what}s to certify: pass a non-empty list of {what}s, {fix}.")
  for i, x in enumerate(examples):
    if isinstance(x, str) or (kind is not None and not isinstance(x, kind)):
      raise ValueError(f"{what.capitalize()} {i} is {type(x).__name__} {str(x)[:40]!r}, not a "
                       f"{what}: pass {fix}.")
  if labels is None:
    return None
  labels = np.asarray(labels)
  if labels.shape != (len(examples),) or not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(f"labels has shape {labels.shape} and dtype {labels.dtype}; pass one "
                     f"integer label per {what} ({len(examples)}).")
  bad = np.nonzero((labels < 0) | (labels >= num_classes))[0]
  if bad.size:
    raise ValueError(f"Label {labels[bad[0]]} of {what} {bad[0]} is outside 0..{num_classes - 1}"
                     f" (the model has {num_classes} classes); fix the labels.")
  return labels.astype(np.int32)


def check_sentences(sentences: Sequence[Sequence[str]], labels, num_classes: int) -> np.ndarray:
  """Checks n token lists and their labels (one each, in 0..num_classes − 1); returns the
  labels as int32 (n,)."""
  labels = check_examples(sentences, labels, num_classes, "sentence",
                           "each a list of tokens, e.g. 'a good movie'.split()")
  if labels is None:
    raise ValueError("No labels given: pass one integer label per sentence.")
  return labels


def _first_rows(certs: Iterable[Certificate], count: int, batch_size: int) -> list[Certificate]:
  """Host copies of batches of ``batch_size`` rows holding ``count`` examples in all, each cut
  to its examples (the last batch is padded)."""
  return [jax.tree.map(lambda a, n=min(batch_size, count - i * batch_size): np.asarray(a)[:n], c)
          for i, c in enumerate(certs)]


def _in_input_order(parts: Sequence[Certificate], order: np.ndarray) -> CertifyResult:
  """Per-example certificates of batches in ``order`` → numpy arrays in the input order."""
  merged = jax.tree.map(lambda *a: np.concatenate(a), *parts)
  inverse = np.argsort(order)
  return CertifyResult(merged.certified[inverse], merged.margins[inverse],
                       merged.logits.lo[inverse], merged.logits.hi[inverse],
                       merged.clean_logits[inverse])


def certify_batches(order: np.ndarray, batch_size: int, lower: Callable[[np.ndarray], tuple],
                    certify_batch: Callable[..., Certificate]) -> CertifyResult:
  """Certifies n rows in batches of ``batch_size`` rows taken in ``order`` (a permutation of
  0..n−1) and returns every row's certificate in the input order: the loop of :func:`certify`
  and :func:`~arc_jax.certify.augmented.certify_split`.

  Args:
    order: int (n,), the rows in the order they are batched (e.g.
      :func:`~arc_jax.certify.sequence.certification_order`).
    batch_size: rows per batch; the last batch is padded, its padding rows dropped.
    lower: ``lower(idx)`` → the arguments of ``certify_batch`` for the rows ``idx`` (int, at
      most ``batch_size``), built on the host in the calling thread.
    certify_batch: ``certify_batch(*lower(idx))`` → a :class:`Certificate` without node axis
      whose first ``len(idx)`` rows are those rows'; :func:`arc_jax.parallel.concurrent_calls`
      of them run at once.
  """
  batches = (lower(order[start:start + batch_size]) for start in range(0, len(order), batch_size))
  certs = parallel.ordered_map(lambda args: certify_batch(*args), batches,
                               parallel.concurrent_calls())
  return _in_input_order(_first_rows(certs, len(order), batch_size), order)


def padded_labels(labels: np.ndarray, batch_size: int) -> np.ndarray:
  """int32 (batch_size,): ``labels`` then 0 for the padding rows (whose results are dropped)."""
  y = np.zeros((batch_size,), np.int32)
  y[:len(labels)] = labels
  return y


@functools.singledispatch
def certify(model: nnx.Module, space: Space, examples: Sequence, labels: Sequence[int] | None,
            vocab: Mapping[str, int], *, batch_size: int = 32, eps: float = 1.0,
            max_grid_slots: int = MAX_GRID_SLOTS, domain: Domain | str = iv.SOUND,
            **options) -> CertifyResult:
  """Certifies raw examples in one call: the convenience entry point for users holding a model.

  Dispatches on the model's type: sentences (token lists) for (Bi-)LSTMs
  (:func:`~arc_jax.certify.sequence.certify_sentences`), trees (:class:`~arc_jax.data.Tree`) for
  Tree-LSTMs (:func:`~arc_jax.certify.trees.certify_trees`); ``certify.register(ModelType, fn)``
  adds a family (as :mod:`arc_jax.certify.sequence` and :mod:`arc_jax.certify.trees` do).

  Args:
    model: the classifier.
    space: a string space (``parse_space``); restricted to ``vocab`` first.
    examples: the examples of the model's family.
    labels: int (n,), one per example (for trees, None: each tree's root label).
    vocab: word → id.
    batch_size, eps: rows per jitted batch; the hull scale (1: the full space).
    max_grid_slots: the largest decomposition grid certified without asking (see
      :data:`MAX_GRID_SLOTS`).
    domain: the DP's abstract domain (static; default :data:`arc_jax.interval.SOUND`), or its
      registered name (:mod:`arc_jax.domains`: ``"interval"``, ``"linear_step"``, ...).
    **options: the family's: ``max_dp_shapes`` for (Bi-)LSTMs, ``join`` for Tree-LSTMs.

  Returns:
    A :class:`~arc_jax.certify.certificate.CertifyResult`: numpy arrays in the input order (per
    example; a tree's are its root's): ``certified`` (n,), ``margins`` (n, K), ``logits_lo``,
    ``logits_hi`` and ``clean_logits`` (n, K); also readable as a mapping
    (``out["certified"]``).
  """
  registered = sorted(kind.__name__ for kind in certify.registry if kind is not object)
  raise ValueError(f"No certification is registered for {type(model).__name__}: pass one of "
                   f"{', '.join(registered) or 'none'}, or register one with "
                   f"certify.register({type(model).__name__}, fn).")


MOVED: dict[str, str] = {}
"""Name → the module that defines it, for the names this module defined before each model kind's
certification got its own module, still readable here (``api.certify_sentences``): filled by
:func:`moved_here`."""


def moved_here(module: str, *names: str) -> None:
  """Keeps ``names`` of the (imported) ``module`` readable as attributes of this module, looked up
  in ``module`` when read: a family's module calls it for the names that lived here before it."""
  MOVED.update(dict.fromkeys(names, module))


def __getattr__(name: str):
  """The :data:`MOVED` names, read from their modules."""
  if name in MOVED:
    return getattr(sys.modules[MOVED[name]], name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
