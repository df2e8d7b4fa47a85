"""The float-soundness cases: random models, spaces, sentences; their strict enumeration check."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import interval
from arc_jax.certify import certify_jit
from arc_jax.nn import LSTMClassifier, predict
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation import PlanBuilder, custom, parse_space
from arc_jax.perturbation.spaces import Space

WORDS = ("a", "the", "of", "good", "bad", "movie", "film", "!", "x", "y")
VOCAB = {w: i for i, w in enumerate(("<pad>",) + WORDS)}
SEQUENCE_FAMILIES = ("lstm", "bilstm", "mean", "bilstm_mean", "attention", "bilstm_attention",
                     "gru", "bigru_mean", "gru_attention")
"""Every direction × pooling of :class:`LSTMClassifier` (``bilstm_<pooling>``; final by default),
and the GRU cell in each pooling (``[bi]gru[_<pooling>]``)."""
SHAPES = [(s, t) for s in range(1, 5) for t in range(4)]


def random_transformation(rng, s, t, duplicate):
  """A user transformation s → t: matches windows starting with one of a few words, rewrites
  them into a few fixed random strings (or repeats the word, ``duplicate`` with s = 1)."""
  name = f"U{s}{t}{'d' if duplicate else ''}"
  starts = frozenset(rng.choice(WORDS, size=4, replace=False).tolist())
  if duplicate:
    return custom(name, 1, t, match=lambda w: w[0] in starts, replace=lambda w: [w * t],
                  repeats_token=True)
  outs = [tuple(rng.choice(WORDS, size=t).tolist()) for _ in range(rng.integers(1, 4))]
  return custom(name, s, t, match=lambda w: w[0] in starts, replace=lambda w: outs)


def random_model(rng, family, dtype, scale, saturate):
  emb = rng.normal(size=(len(VOCAB), 4))
  if family.startswith("tree"):
    model = nnx.eval_shape(lambda: TreeLSTMClassifier(emb, hidden=4, num_classes=3,
                                                      dropout_rate=0.0, rngs=nnx.Rngs(0),
                                                      param_dtype=dtype))
  else:
    pooling = family.split("_")[-1]
    model = nnx.eval_shape(lambda: LSTMClassifier(
        emb, hidden=4, projection=3, head_hidden=3, num_classes=3,
        bidirectional=family.startswith("bi"),
        pooling=pooling if pooling in ("mean", "attention") else "final",
        cell="gru" if "gru" in family else "lstm",
        dropout_rate=0.0, rngs=nnx.Rngs(0), param_dtype=dtype))
  graphdef, state = nnx.split(model)

  def draw(path, v):
    x = rng.normal(size=v.shape) * scale
    if saturate and "bias" in str(path[-2:]) or (saturate and "b_iou" in str(path)):
      x = x + rng.choice([-15.0, 15.0], size=v.shape)
    return jnp.asarray(x, dtype)

  return nnx.merge(graphdef, jax.tree_util.tree_map_with_path(draw, state))


def random_space(rng, shape, tree):
  """[standard kinds..., one user transformation of ``shape``] with random budgets."""
  s, t = shape
  duplicate = s == 1 and t >= 1 and bool(rng.integers(2)) and not (tree and t == 1)
  if tree and t == 2:
    duplicate = True
  synonyms = {w: rng.choice(WORDS, size=2).tolist() for w in rng.choice(WORDS, size=4)}
  user = random_transformation(rng, s, t, duplicate)
  standard = {(1, 0): "Del", (1, 1): "Sub", (1, 2): "Ins"}
  kinds = [k for k in ("Del", "Ins", "Sub") if not (tree and k == standard.get(shape))]
  kinds = list(rng.choice(kinds, size=int(rng.integers(0, 3)), replace=False))
  spec = "[" + ",".join(f"({k},{int(rng.integers(1, 3))})" for k in kinds) + "]"
  base = parse_space(spec, synonyms=synonyms, stopwords=("a", "the", "of"))
  space = Space(base.transformations + (user,), base.budgets + (int(rng.integers(1, 3)),))
  return space.restricted_to(VOCAB)


def random_sentence(rng):
  return tuple(rng.choice(WORDS, size=int(rng.integers(1, 6))).tolist())


def in_chunks(members, chunk_logits, size=64):
  """The concrete root logits of every member, computed ``size`` members at a time."""
  return np.concatenate([chunk_logits(members[start:start + size])
                         for start in range(0, len(members), size)])


def sequence_logits(graphdef, state, strings):
  """The concrete logits of every string, by the model's own forward pass at batch shape 64."""
  empty = PlanBuilder(parse_space("[]"), VOCAB, length_buckets=(16,))

  def chunk_logits(chunk):
    part = empty.build(chunk, batch_size=64)
    return np.asarray(predict(graphdef, state, part.token_ids, part.lengths))[:len(chunk)]

  return in_chunks(strings, chunk_logits)


def check_sequence(model, space, sentences, labels, domain=interval.SOUND):
  """Returns the number of members checked; asserts strict containment."""
  plan = PlanBuilder(space, VOCAB, min_replacement_slots=4).build(sentences, batch_size=4)
  graphdef, state = nnx.split(model)
  cert = certify_jit(graphdef, space.signature, state, plan, jnp.asarray(labels, jnp.int32),
                     domain=domain)
  members = 0
  for b, sentence in enumerate(sentences):
    strings = list(space.enumerate(sentence))
    members += len(strings)
    logits = sequence_logits(graphdef, state, strings)
    assert_contained(cert.logits.lo[b], cert.logits.hi[b], cert.margins[b], logits, labels[b],
                     f"{sentence} under {space}")
  return members


def assert_contained(lo, hi, margins, logits, label, what):
  lo, hi, margins = np.asarray(lo), np.asarray(hi), np.asarray(margins)
  assert np.all(lo <= logits) and np.all(logits <= hi), (
      f"logits escape for {what}: {max(np.max(lo - logits), np.max(logits - hi))}")
  diffs = logits[:, label:label + 1] - logits
  assert np.all(margins <= diffs), f"margin escape for {what}: {np.max(margins - diffs)}"
