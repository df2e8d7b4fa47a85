"""Certification entry points, one for every model family (they dispatch on the model's type):
:func:`certify_model` (a lowered batch), its jitted :data:`certify_jit` and pure
:func:`make_certify_fn`, and the convenience :func:`certify` (raw examples).

Each takes its abstract domain as a :class:`~arc_jax.domain.Domain` or by its registered name
(:mod:`arc_jax.domains`: ``domain="linear_step"``, with the domain's default settings)."""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Mapping, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import domains
from arc_jax import interval as iv
from arc_jax import parallel
from arc_jax.certify.attention_dp import attention_features
from arc_jax.certify.certificate import Certificate, CertifyResult, certified_by, intersect
from arc_jax.certify.lstm_dp import certified_features
from arc_jax.certify.tree_dp import certify_tree_model, check_domain
from arc_jax.data.trees import Tree
from arc_jax.domain import Domain
from arc_jax.nn.models import LSTMClassifier
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation.plans import Plan, PlanBuilder, reachable_signature
from arc_jax.perturbation.shapes import MAX_DP_SHAPES
from arc_jax.perturbation.spaces import Signature, Space
from arc_jax.perturbation.split import SplitSpace
from arc_jax.perturbation.trees import TreeBatchBuilder, TreeSignature, TreeSpace, tree_space


@functools.singledispatch
def certify_model(model: nnx.Module, space, batch, labels: jax.Array,
                  eps: jax.Array | float = 1.0, dropout_key: jax.Array | None = None,
                  domain: Domain | str = iv.SOUND, **options) -> Certificate:
  """Certifies a batch with the DP of the model's family; differentiable in the model.

  Dispatches on the model's type: (Bi-)LSTMs to :func:`certify_sequence_model`, Tree-LSTMs to
  :func:`~arc_jax.certify.tree_dp.certify_tree_model` (its ``options``: ``budgets``, ``join``);
  ``certify_model.register(ModelType, fn)`` adds a family.

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
      (:mod:`arc_jax.domains`), which :func:`certify_sequence_model`, :data:`certify_jit`,
      :func:`make_certify_fn` and :func:`certify` resolve (a family's own function may not).
    **options: the family's own (static or traced) arguments.
  """
  raise TypeError(f"No certification DP is registered for {type(model).__name__}: "
                  f"register one with certify_model.register({type(model).__name__}, fn).")


FEATURES_DP = {"final": certified_features, "mean": certified_features,
               "attention": attention_features}
"""``model.pooling`` → the DP that bounds the pooled features over S(x): the final state and the
mean over the decomposition slots (:func:`~arc_jax.certify.lstm_dp.certified_features`), a pooling
over the states at every position over the per-position state boxes
(:func:`~arc_jax.certify.attention_dp.attention_features`). A new pooling adds its entry."""


def features_dp(pooling: str):
  """The entry of :data:`FEATURES_DP` for ``pooling``; a ValueError for a pooling without one."""
  if pooling not in FEATURES_DP:
    raise ValueError(f"No certification DP for pooling={pooling!r}; the DPs cover "
                     f"{sorted(FEATURES_DP)} (add an entry to FEATURES_DP).")
  return FEATURES_DP[pooling]


def certify_sequence_model(model: LSTMClassifier, space: Space | Signature, plan: Plan,
                           labels: jax.Array, eps: jax.Array | float = 1.0,
                           dropout_key: jax.Array | None = None,
                           domain: Domain | str = iv.SOUND) -> Certificate:
  """Certifies a batch of sentences (a :class:`Certificate` without node axis).

  Args:
    model: the classifier.
    space: the perturbation space the plan was built for (or its signature).
    plan: the batch (B, N) lowered by :class:`~arc_jax.perturbation.PlanBuilder`.
    labels: int (B,).
    eps: hull scale in [0, 1] (1 = the full space; smaller values are the training curriculum).
    dropout_key: applies the head's dropout (training); None for certification.
    domain: the abstract domain (static; or its name, :mod:`arc_jax.domains`):
      :data:`arc_jax.interval.SOUND` (default) for a certificate that holds in floating point,
      :data:`arc_jax.interval.UNROUNDED` for the cheaper surrogate bounds of training
      objectives. A domain that ``refines`` another (the
      linear-step domain refines the sound intervals) is intersected with that domain's
      certificate, so its bounds are never looser, in floating point too.
  """
  chex.assert_rank(plan.token_ids, 2)
  chex.assert_shape(labels, (plan.token_ids.shape[0],))
  domain = domains.resolve(domain)
  eps = jnp.asarray(eps, model.embeddings[...].dtype)
  box, clean = features_dp(model.pooling)(model, space.signature, plan, eps, domain)
  cert = certificate_from_features(model, box, clean, labels, dropout_key, domain)
  if domain.refines is None:
    return cert
  coarse = certify_sequence_model(model, space, plan, labels, eps, dropout_key, domain.refines)
  return intersect(cert, coarse, labels)


certify_model.register(LSTMClassifier, certify_sequence_model)
certify_model.register(TreeLSTMClassifier, certify_tree_model)


def certificate_from_features(model: LSTMClassifier, box: iv.Value, clean: jax.Array,
                              labels: jax.Array, dropout_key: jax.Array | None = None,
                              domain: Domain = iv.SOUND) -> Certificate:
  """The :class:`Certificate` of a box (B, H_in) of pooled features and the clean features.

  The head is applied to both with the same dropout masks; ``box`` may come from any sound
  abstraction of the pooled features (the DP, or A3T's intervals) in ``domain``.
  """
  hidden = model.head_activations(box, dropout_key, domain)
  hidden_clean = model.head_activations(clean, dropout_key)
  logits = domain.to_box(model.head_out(hidden, domain))
  pairs = domain.margin_lower_bounds(hidden, model.head_out.kernel[...],
                                     model.head_out.bias[...])
  rows = jnp.arange(labels.shape[0])
  margins = pairs[rows, labels].at[rows, labels].set(0.0)  # (B, K): z_y − z_j, 0 at j = y
  return Certificate(logits, model.head_out(hidden_clean), margins, certified_by(margins, labels))


def _certify_state(graphdef, signature, state, batch, labels, eps=1.0, dropout_key=None, *,
                   domain=iv.SOUND, **options):
  states = state if isinstance(state, tuple) else (state,)
  return certify_model(nnx.merge(graphdef, *states), signature, batch, labels, eps, dropout_key,
                       domains.resolve(domain), **options)


STATIC_OPTIONS = ("join",)
"""The family options of :func:`certify_model` that select code (the tree DP's ``join``); the
others (the tree DP's ``budgets``) are traced."""

certify_jit = jax.jit(_certify_state, static_argnums=(0, 1),
                      static_argnames=("domain",) + STATIC_OPTIONS)
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


def check_grid(sig: Signature | TreeSignature, space, batch_size: int, hidden: int, itemsize: int,
               max_grid_slots: int) -> None:
  """Refuses a space whose decomposition grid exceeds ``max_grid_slots``, naming its size and an
  estimate of the DP's memory: a box (lo, hi) of (h, c) per slot, row and hidden unit, for the
  states the DP keeps at once (a window of max s_k states for sequences; the P ≈ C²/2^m split
  pairs of a merge step for trees)."""
  slots = int(np.prod(sig.grid))
  if slots <= max_grid_slots:
    return
  if isinstance(sig, TreeSignature):
    states = slots * (slots + 1) // 2
  else:
    states = slots * (max(sig.s, default=1) + len(sig.s) + 1)
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


def _check_examples(examples: Sequence, labels, num_classes: int, what: str, fix: str
                    ) -> np.ndarray | None:
  """Checks a list of examples and their labels (None: no labels given); returns the labels."""
  if isinstance(examples, str) or not len(examples):
    raise ValueError(f"No {what}s to certify: pass a non-empty list of {what}s, {fix}.")
  for i, x in enumerate(examples):
    if isinstance(x, str) or (what == "tree" and not isinstance(x, Tree)):
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
  labels = _check_examples(sentences, labels, num_classes, "sentence",
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
    order: int (n,), the rows in the order they are batched (e.g. :func:`certification_order`).
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


def certification_order(builder: PlanBuilder, sentences: Sequence[Sequence[str]]) -> np.ndarray:
  """Indices of ``sentences`` sorted by (:meth:`PlanBuilder.grid_group`, length).

  Consecutive batches then share a padded width and mostly a reachable grid, so each runs the DP
  on the smallest grid its rows need (:func:`reachable_signature`) or the builder's shape menu
  allows.
  """
  keys = [(*builder.grid_group(s), len(s)) for s in sentences]
  return np.asarray(sorted(range(len(sentences)), key=keys.__getitem__), np.int64)


@functools.singledispatch
def certify(model: nnx.Module, space: Space, examples: Sequence, labels: Sequence[int] | None,
            vocab: Mapping[str, int], *, batch_size: int = 32, eps: float = 1.0,
            max_grid_slots: int = MAX_GRID_SLOTS, domain: Domain | str = iv.SOUND,
            **options) -> CertifyResult:
  """Certifies raw examples in one call: the convenience entry point for users holding a model.

  Dispatches on the model's type: sentences (token lists) for (Bi-)LSTMs
  (:func:`certify_sentences`), trees (:class:`~arc_jax.data.Tree`) for Tree-LSTMs
  (:func:`certify_trees`); ``certify.register(ModelType, fn)`` adds a family.

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
  raise ValueError(f"No certification is registered for {type(model).__name__}: pass an "
                   "LSTMClassifier or a TreeLSTMClassifier, or register one with "
                   f"certify.register({type(model).__name__}, fn).")


@certify.register
def certify_sentences(model: LSTMClassifier, space: Space, sentences: Sequence[Sequence[str]],
                      labels: Sequence[int], vocab: Mapping[str, int], *, batch_size: int = 32,
                      eps: float = 1.0, max_grid_slots: int = MAX_GRID_SLOTS,
                      domain: Domain | str = iv.SOUND, max_dp_shapes: int = MAX_DP_SHAPES
                      ) -> CertifyResult:
  """:func:`certify` for (Bi-)LSTMs: raw token lists.

  The space is restricted to ``vocab`` first (``Space.restricted_to``): replacements with a word
  the model has no vector for are dropped. Sentences are grouped by width and reachable grid
  (:func:`certification_order`) and certified in jitted batches, each on its reachable grid
  (:func:`reachable_signature`), with at most ``max_dp_shapes`` (width, grid) shapes fitted to
  these sentences (:mod:`arc_jax.perturbation.shapes`; 0: every length bucket and exact grid).
  The compiled functions are cached across calls (one compilation per shape, model structure
  and space signature). ``domain``: the DP's abstract domain (default the sound intervals;
  :data:`arc_jax.linear_step.LINEAR_STEP` certifies more of the models not trained for
  intervals, at a higher cost).

  Raises:
    ValueError: (one line, naming the fix) no sentences, a sentence given as a string, no labels,
      labels of the wrong length or outside the model's classes, a space given as a string or
      as a split space, a space whose decomposition grid exceeds ``max_grid_slots``, float64
      parameters while JAX's 64-bit mode is off, a vocabulary id outside the embedding table, or
      an unknown domain name (listing the registered ones).
  """
  domain = domains.resolve(domain)
  check_inputs(model, space, vocab)
  labels = check_sentences(sentences, labels, model.num_classes)
  check_grid(space.signature, space, batch_size, model.hidden, model.embeddings[...].itemsize,
             max_grid_slots)
  space = space.restricted_to(vocab)
  builder = PlanBuilder(space, vocab)
  builder.bound_shapes(sentences, max_dp_shapes)
  graphdef, state = nnx.split(model)

  def lower(idx):
    plan = builder.build([sentences[i] for i in idx], batch_size=batch_size)
    return (reachable_signature(space, plan, builder.shape_menu), plan,
            padded_labels(labels[idx], batch_size))

  return certify_batches(
      certification_order(builder, sentences), batch_size, lower,
      lambda signature, plan, y: certify_jit(graphdef, signature, state, plan, y, eps,
                                             domain=domain))


@certify.register
def certify_trees(model: TreeLSTMClassifier, space: Space | TreeSpace, trees: Sequence[Tree],
                  labels: Sequence[int] | None, vocab: Mapping[str, int], *,
                  batch_size: int = 32, eps: float = 1.0, max_grid_slots: int = MAX_GRID_SLOTS,
                  domain: Domain | str = iv.SOUND, join: str = "after_cell") -> CertifyResult:
  """:func:`certify` for Tree-LSTMs: trees, certified at their roots.

  Restricts the space to ``vocab`` and maps it to a tree space (:func:`tree_space`), lowers the
  trees with a :class:`TreeBatchBuilder` for that space in batches sorted by size, and reads the
  certificates at the roots. Compiled functions are cached across calls of the same shapes.

  Args:
    model: the classifier.
    space: a string space of deletions, substitutions and duplications (``parse_space``), or a
      tree space.
    trees: :class:`~arc_jax.data.Tree` (post-order; ``from_nested`` or the SST loaders).
    labels: root labels (n,); None: each tree's own root label.
    vocab: word → id; every leaf word must be in it.
    batch_size, eps, join, domain: as for :func:`~arc_jax.certify.tree_dp.certify_tree_model`
      (which refuses a domain it has no rules for, the linear-step domain).
    max_grid_slots: see :func:`certify`.
  """
  domain = domains.resolve(domain)
  check_inputs(model, space, vocab)
  check_domain(domain)
  num_classes = model.num_classes
  given = _check_examples(trees, labels, num_classes, "tree",
                          "each an arc_jax.data.Tree, e.g. from_nested(('a', ('good', 'movie')))")
  roots = given if given is not None else _check_examples(
      trees, [t.labels[-1] for t in trees], num_classes, "tree", "labels=[...] (one per tree)")
  string_space = space.space if isinstance(space, TreeSpace) else space
  check_grid(tree_space(string_space).signature, string_space, batch_size, model.hidden,
             model.embeddings[...].itemsize, max_grid_slots)
  tspace = tree_space(string_space.restricted_to(vocab))
  builder = TreeBatchBuilder(vocab, tspace)
  graphdef, state = nnx.split(model)

  def lower(idx):
    batch = builder.build([trees[i] for i in idx], batch_size)
    node_labels = np.full(batch.shape, -1, np.int32)
    node_labels[np.arange(len(idx)), batch.num_nodes[:len(idx)] - 1] = roots[idx]
    return batch, node_labels

  return certify_batches(
      np.argsort([t.num_nodes for t in trees], kind="stable"), batch_size, lower,
      lambda batch, node_labels: certify_jit(graphdef, tspace.signature, state, batch,
                                             node_labels, eps, join=join,
                                             domain=domain).per_example())
