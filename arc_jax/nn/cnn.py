"""A CNN text classifier (A3T's word-level SST-2 model, Zhang et al. 2020) and its sound interval
bounds over a perturbation space.

frozen embeddings (V, E) → one 1-D convolution over positions (``filters`` filters of
``kernel_width`` words, bias) → ReLU → max over the windows of the sentence → Dropout →
Linear → K.

Windows. A sentence of n words has the windows j = 0 .. max(n − w + 1, 1) − 1 (w the kernel
width): window j reads positions j .. j + w − 1, and positions at or past n read the zero vector
(so a sentence shorter than w, the empty one included, has one window). Windows past the last are
masked out before the max; as every window's value is ≥ 0 (ReLU) and there is at least one,
masking them to 0 leaves the max unchanged.

The convolution is computed as A3T's is in real arithmetic, but in a fixed evaluation order that
the bounds follow: per position p a *slot term* ``T[p] = e(x_p) @ K`` (one matmul, (E, w·F),
reshaped (w, F); exactly 0 at padding), and per window ``((T[j][0] + T[j+1][1]) + …) + bias``.

Bounds (:func:`cnn_feature_bounds`). Let z range over S(x). The token z has at position p is an
original word x_q or the output word l of a rewrite of the window starting at a (nominal
position q = a + l), moved by Δ(q): p = q + Δ(q), Δ(q) the length change of the rewrites applied
to windows that end before q. T_k applies there at most min(δ_k, m_k(q)) times, m_k(q) its
matching windows that end before q, so −L(q) ≤ Δ(q) ≤ R(q) with L(q) = Σ_k (s_k − t_k)⁺·
min(δ_k, m_k(q)), R(q) = Σ_k (t_k − s_k)⁺·min(δ_k, m_k(q)) (:func:`row_shifts`), at most
D = Σ_k δ_k·(s_k − t_k)⁺ and I = Σ_k δ_k·(t_k − s_k)⁺. So the box H_p that joins the slot-term
boxes of every word of nominal position q with −L(q) ≤ p − q ≤ R(q) (the original x_q and every
output landing at q) contains the slot terms of every z at p; it also holds the zero vector where
some z is shorter than p + 1 (p ≥ n − L_b, L_b the same count over the whole sentence), and is
the zero vector alone where none is longer (p ≥ n + R_b). Each window's pre-activation box is the
sum of its slot boxes (sound addition), the ReLU is monotone, and with n − L_b ≤ |z| ≤ n + R_b:

* every window of any z is a window j < max(n + R_b − w + 1, 1), so the pooled feature is at
  most the largest upper end of those windows;
* every z has the windows j < max(n − L_b − w + 1, 1), so the pooled feature is at least the
  largest lower end of those (and at least 0).

For spaces of 1→1 rewrites only (Sub), D = I = 0 and H_p is the hull of the position's own word
and its replacements: A3T's interval abstraction. Length-changing rewrites (Del, Ins) shift
the words after their first match, and the bound joins up to D + I + 1 nominal positions there:
sound but coarse. The budgets only bound the shifts (a position's hull covers any number of
substitutions), so the bounds also hold for the restricted spaces of ARC-A3T's members, whose
plans only clear matches. Every box encloses every floating-point
evaluation of the model (:mod:`arc_jax.interval`): slot terms by the sound affine rule, sums and
ReLU by their rules, joins and maxima exactly.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import interval as iv
from arc_jax.domain import Domain
from arc_jax.nn.cells import Dense, dropout, torch_uniform_init
from arc_jax.nn.models import FrozenEmbedding, check_param_dtype
from arc_jax.perturbation.plans import Plan
from arc_jax.perturbation.spaces import Signature, Space


class CNNClassifier(nnx.Module):
  """Embeddings → Conv1D(filters, kernel_width) → ReLU → max over windows → Linear.

  Args:
    embeddings: (V, E) word vectors, frozen; row 0 is padding.
    filters: F, the convolution's output channels (A3T: 100).
    kernel_width: w, words per window (A3T: 5).
    num_classes: K.
    dropout_rate: dropout on the pooled features (A3T: none).
    rngs: parameter initialisation (PyTorch's uniform ±1/√fan_in).
    param_dtype: dtype of the parameters and embeddings.
  """

  def __init__(self, embeddings: np.ndarray, *, filters: int = 100, kernel_width: int = 5,
               num_classes: int = 2, dropout_rate: float = 0.0, rngs: nnx.Rngs,
               param_dtype=jnp.float32):
    check_param_dtype(param_dtype)
    if filters < 1 or kernel_width < 1:
      raise ValueError(f"filters={filters} and kernel_width={kernel_width} must be >= 1.")
    dim = embeddings.shape[1]
    init = torch_uniform_init(kernel_width * dim)
    self.embeddings = FrozenEmbedding(jnp.asarray(embeddings, param_dtype))
    # conv_kernel[:, k·F + f] is filter f's weights on the word at slot k of a window.
    self.conv_kernel = nnx.Param(init(rngs.params(), (dim, kernel_width * filters), param_dtype))
    self.conv_bias = nnx.Param(init(rngs.params(), (filters,), param_dtype))
    self.head_out = Dense(filters, num_classes, rngs=rngs, param_dtype=param_dtype)
    self.filters = filters
    self.kernel_width = kernel_width
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate

  def embed(self, token_ids: jax.Array) -> jax.Array:
    """Word vectors (..., E); an id beyond the table gives NaN (nothing is certified about it)."""
    return jnp.take(self.embeddings[...], token_ids, axis=0, mode="fill", fill_value=jnp.nan)

  def slot_terms(self, embedded: iv.Value, domain: Domain = iv.SOUND) -> iv.Value:
    """(..., E) word vectors (or boxes) → (..., w, F): each word's term at every window slot."""
    out = domain.linear(embedded, self.conv_kernel[...])
    return jax.tree.map(lambda a: a.reshape(a.shape[:-1] + (self.kernel_width, self.filters)),
                        out)

  def windows(self, terms: iv.Value, count: int, domain: Domain = iv.SOUND) -> iv.Value:
    """Pre-activations (B, count, F) of windows 0 .. count − 1 from slot terms (B, P, w, F),
    P ≥ count + w − 1: ``((T[j][0] + T[j+1][1]) + …) + bias``, in this order."""
    slot = lambda k: jax.tree.map(lambda a: a[:, k:k + count, k], terms)
    acc = slot(0)
    for k in range(1, self.kernel_width):
      acc = domain.add(acc, slot(k))
    return domain.add(acc, self.conv_bias[...])

  def window_count(self, lengths: jax.Array) -> jax.Array:
    """(B,) windows of sentences of ``lengths``: max(n − w + 1, 1)."""
    return jnp.maximum(lengths - self.kernel_width + 1, 1)

  def features_from_embeddings(self, embedded: jax.Array, lengths: jax.Array) -> jax.Array:
    """Pooled features (B, F) of embedded padded sentences (B, N, E); positions at or beyond
    ``lengths`` do not influence them (the entry point of HotFlip's gradients)."""
    chex.assert_rank(embedded, 3)
    n_pad = embedded.shape[1]
    real = jnp.arange(n_pad)[None, :] < lengths[:, None]
    terms = jnp.where(real[:, :, None, None], self.slot_terms(embedded), 0.0)
    terms = jnp.pad(terms, ((0, 0), (0, self.kernel_width - 1), (0, 0), (0, 0)))
    act = jax.nn.relu(self.windows(terms, n_pad))
    valid = jnp.arange(n_pad)[None, :] < self.window_count(lengths)[:, None]
    return jnp.where(valid[..., None], act, 0.0).max(axis=1)

  def features(self, token_ids: jax.Array, lengths: jax.Array) -> jax.Array:
    """Pooled features (B, F) of padded sentences ``token_ids`` (B, N)."""
    chex.assert_rank(token_ids, 2)
    chex.assert_type([token_ids, lengths], int)
    return self.features_from_embeddings(self.embed(token_ids), lengths)

  def head(self, features: iv.Value, dropout_key: jax.Array | None = None,
           domain: Domain = iv.SOUND) -> iv.Value:
    """Pooled features (..., F) → logits (..., K); arrays or boxes (one dropout mask for both)."""
    return self.head_out(dropout(features, self.dropout_rate, dropout_key, domain), domain)

  def __call__(self, token_ids: jax.Array, lengths: jax.Array,
               dropout_key: jax.Array | None = None) -> jax.Array:
    """Logits (B, K) of padded sentences ``token_ids`` (B, N) with ``lengths`` (B,)."""
    return self.head(self.features(token_ids, lengths), dropout_key)


def position_shifts(signature: Signature) -> tuple[int, int]:
  """(D, I): how far rewrites can move a word left (deletions) and right (insertions)."""
  sig = signature.signature
  left = sum(d * max(s - t, 0) for s, t, d in zip(sig.s, sig.t, sig.budgets))
  right = sum(d * max(t - s, 0) for s, t, d in zip(sig.s, sig.t, sig.budgets))
  return left, right


def row_shifts(signature: Signature, plan: Plan, nominal: int
               ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """How far rewrites can move each word, per row: (L (B, nominal), R (B, nominal), L_b (B,),
  R_b (B,)).

  A word of nominal position q moves by Δ(q), the length change of the rewrites applied to
  windows that end before q. T_k applies at most min(δ_k, m_k(q)) times there, m_k(q) the
  windows ending before q where it matches (applications do not overlap), so
  −L(q) ≤ Δ(q) ≤ R(q) with L(q) = Σ_k (s_k − t_k)⁺·min(δ_k, m_k(q)) and
  R(q) = Σ_k (t_k − s_k)⁺·min(δ_k, m_k(q)); the same with every match counted bounds the
  length change of the whole sentence (L_b, R_b). Each is at most :func:`position_shifts`'.
  """
  sig = signature.signature
  rows, n_pad = plan.token_ids.shape
  left_q = right_q = jnp.zeros((rows, nominal), jnp.int32)
  left_b = right_b = jnp.zeros((rows,), jnp.int32)
  for s, t, d, tp in zip(sig.s, sig.t, sig.budgets, plan.transformations):
    match = tp.match.astype(jnp.int32)
    total = match.sum(axis=1)
    before = jnp.cumsum(match, axis=1) - match  # windows ending at j < q, for q < N
    before = jnp.concatenate([before, jnp.broadcast_to(total[:, None], (rows, nominal - n_pad))],
                             axis=1)
    left_q = left_q + max(s - t, 0) * jnp.minimum(before, d)
    right_q = right_q + max(t - s, 0) * jnp.minimum(before, d)
    left_b = left_b + max(s - t, 0) * jnp.minimum(total, d)
    right_b = right_b + max(t - s, 0) * jnp.minimum(total, d)
  return left_q, right_q, left_b, right_b


def _check_interval_domain(domain: Domain) -> None:
  if not isinstance(domain, iv.IntervalDomain):
    raise ValueError(f"The CNN's bounds have rules for the interval domains only "
                     f"(arc_jax.interval.SOUND, arc_jax.interval.UNROUNDED), not "
                     f"{type(domain).__name__}.")


def _shifted(x: jax.Array, offset: int, length: int, fill) -> jax.Array:
  """``out[:, q] = x[:, q − offset]`` for q < ``length`` (``fill`` where q − offset is outside
  x), along axis 1."""
  n = x.shape[1]
  src = jnp.arange(length) - offset
  inside = (src >= 0) & (src < n)
  picked = jnp.take(x, jnp.clip(src, 0, n - 1), axis=1)
  shape = (1, length) + (1,) * (x.ndim - 2)
  return jnp.where(inside.reshape(shape), picked, fill)


def cnn_feature_bounds(model: CNNClassifier, space: Space | Signature, plan: Plan,
                       eps: jax.Array | float = 1.0, domain: Domain = iv.SOUND
                       ) -> tuple[iv.Interval, jax.Array]:
  """(box (B, F) of the pooled features of every member of S(x), clean features (B, F)) for
  the sentences of ``plan`` (lowered under ``space``); see the module docstring for why the box
  is sound. ``eps`` < 1 shrinks each rewrite's output boxes towards the slot terms of the word
  at the same nominal position (the training curriculum; only ε = 1 is a sound abstraction)."""
  _check_interval_domain(domain)
  sig = space.signature
  chex.assert_rank(plan.token_ids, 2)
  plan = jax.tree.map(jnp.asarray, plan)
  rows, n_pad = plan.token_ids.shape
  w = model.kernel_width
  left, right = position_shifts(sig)
  nominal = n_pad + max(sig.t, default=1)  # nominal positions a + l of any output word
  lengths = plan.lengths
  real = jnp.arange(n_pad)[None, :] < lengths[:, None]

  def terms_of(ids):
    return model.slot_terms(domain.lift(model.embed(ids)), domain)

  orig = terms_of(plan.token_ids)  # (B, N, w, F)
  orig = jax.tree.map(lambda a: _shifted(a, 0, nominal, 0.0), orig)
  valid = _shifted(real, 0, nominal, False)
  box = orig
  for s, t, tp in zip(sig.s, sig.t, plan.transformations):
    for place in range(t):
      ids, mask = tp.replacement_ids[:, :, place], tp.replacement_mask[:, :, place]
      words = terms_of(ids)  # (B, N, R, w, F)
      flat = jax.tree.map(lambda a: a.reshape(a.shape[:3] + (-1,)), words)
      hull = domain.hull(flat, mask, axis=2, empty=jnp.zeros(flat.lo.shape[:2] + flat.lo.shape[3:],
                                                             flat.lo.dtype))
      hull = jax.tree.map(lambda a: a.reshape(a.shape[:2] + (w, model.filters)), hull)
      hit = tp.match & mask.any(axis=-1)
      # The window ending at j starts at j − s + 1; its output word `place` lands at
      # nominal position j − s + 1 + place.
      offset = place - s + 1
      hull = jax.tree.map(lambda a: _shifted(a, offset, nominal, 0.0), hull)
      hit = _shifted(hit, offset, nominal, False)
      anchor = domain.where(valid[..., None, None], orig, hull)
      hull = domain.shrink_towards(hull, anchor, eps)
      box, valid = _masked_join(domain, box, valid, hull, hit)
  # H_p joins the nominal positions q with −L(q) ≤ p − q ≤ R(q) (at most p − I .. p + D).
  left_q, right_q, left_b, right_b = row_shifts(sig, plan, nominal)
  span = max(n_pad + right, w)
  size = span + left + right
  ext = jax.tree.map(lambda a: _shifted(a, right, size, 0.0), box)
  ext_valid = _shifted(valid, right, size, False)
  ext_left, ext_right = _shifted(left_q, right, size, 0), _shifted(right_q, right, size, 0)
  slots = slots_valid = None
  for o in range(left + right + 1):  # slot p reads q = p + o − I, so p − q = I − o
    shift = right - o
    term = jax.tree.map(lambda a: a[:, o:o + span], ext)
    term_valid = (ext_valid[:, o:o + span] & (shift >= -ext_left[:, o:o + span])
                  & (shift <= ext_right[:, o:o + span]))
    if slots is None:
      slots, slots_valid = term, term_valid
    else:
      slots, slots_valid = _masked_join(domain, slots, slots_valid, term, term_valid)
  p = jnp.arange(span)[None, :]
  zero = iv.point(jnp.zeros_like(slots.lo))
  slots = domain.where(slots_valid[..., None, None], slots, zero)  # no word can stand at p
  shorter = (p >= (lengths - left_b)[:, None])[..., None, None]  # some member ends before p
  none_longer = (p >= (lengths + right_b)[:, None])[..., None, None]  # no member reaches p
  slots = domain.where(shorter, domain.join(slots, zero), slots)
  slots = domain.where(none_longer, zero, slots)
  count = max(span - w + 1, 1)
  pre = model.windows(jax.tree.map(lambda a: jnp.pad(
      a, ((0, 0), (0, max(count + w - 1 - span, 0)), (0, 0), (0, 0))), slots), count, domain)
  act = domain.to_box(domain.monotone(jax.nn.relu, pre))
  j = jnp.arange(count)[None, :]
  upper_windows = j < jnp.maximum(lengths + right_b - w + 1, 1)[:, None]
  lower_windows = j < jnp.maximum(lengths - left_b - w + 1, 1)[:, None]
  hi = jnp.where(upper_windows[..., None], act.hi, 0.0).max(axis=1)
  lo = jnp.where(lower_windows[..., None], act.lo, 0.0).max(axis=1)
  return iv.Interval(lo, hi), model.features(plan.token_ids, plan.lengths)


def _masked_join(domain: Domain, x, x_valid, y, y_valid):
  """:meth:`Domain.masked_join` for values (B, P, w, F) with validity (B, P)."""
  both = domain.join(x, y)
  xv, yv = x_valid[..., None, None], y_valid[..., None, None]
  out = domain.where(xv & yv, both, domain.where(yv, y, x))
  return out, x_valid | y_valid


def certified_logits(model: CNNClassifier, space: Space | Signature, plan: Plan,
                     labels: jax.Array, eps: jax.Array | float = 1.0,
                     dropout_key: jax.Array | None = None, domain: Domain = iv.SOUND
                     ) -> tuple[iv.Interval, jax.Array, jax.Array]:
  """(logit box (B, K) of every member of S(x), clean logits (B, K), margins (B, K)) of a batch
  of sentences under ``space``, from :func:`cnn_feature_bounds`; differentiable in the model.

  ``margins[b, j]`` lower-bounds z_y − z_j (0 at j = y = ``labels[b]``) over the same members,
  computed through the last layer directly (tighter than subtracting logit bounds). The head's
  dropout (``dropout_key``) applies one mask to the box and the clean features.
  """
  chex.assert_rank(plan.token_ids, 2)
  chex.assert_shape(labels, (plan.token_ids.shape[0],))
  eps = jnp.asarray(eps, model.embeddings[...].dtype)
  box, clean = cnn_feature_bounds(model, space, plan, eps, domain)
  features = dropout(box, model.dropout_rate, dropout_key, domain)
  clean = dropout(clean, model.dropout_rate, dropout_key)
  kernel, bias = model.head_out.kernel[...], model.head_out.bias[...]
  logits = domain.to_box(domain.linear(features, kernel, bias))
  pairs = domain.margin_lower_bounds(features, kernel, bias)
  rows = jnp.arange(labels.shape[0])
  margins = pairs[rows, labels].at[rows, labels].set(0.0)
  return logits, model.head_out(clean), margins
