"""Random float64 LSTM/GRU classifiers, spaces, sentences on a toy vocabulary; a soundness check."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from hypothesis import strategies as st

import arc_jax
from arc_jax.certify import certify_jit
from arc_jax.nn import LSTMClassifier, predict
from arc_jax.perturbation import (PlanBuilder, ShapeMenu, on_reachable_grid, parse_space,
                                  reachable_signature)

WORDS = ["<pad>", "a", "the", "to", "of", "and", "movie", "film", "movies", "films", "this",
         "it", "is", "'s", "one", "most", "best", "good", "!", "?", "these", "x", "y"]
VOCAB = {w: i for i, w in enumerate(WORDS)}
SWAP = arc_jax.custom("Swap", 2, 2, match=lambda w: w[0] != w[1], replace=lambda w: [w[::-1]])
KINDS = ["Del", "Ins", "Sub", "Trans1", "Trans2", "Trans3", "Trans4", "Swap"]
TOL = 1e-9
S_REVIEW = "[(Trans1,1),(Trans2,1),(Trans3,1),(Trans4,1),(Sub,2)]"


def make_model(seed, hidden, weight_scale, bidirectional, pooling="final", num_classes=2,
               cell="lstm"):
  rng = np.random.default_rng(seed)
  emb = rng.normal(size=(len(WORDS), 4))
  model = LSTMClassifier(emb, hidden=hidden, projection=3, head_hidden=3, num_classes=num_classes,
                         bidirectional=bidirectional, pooling=pooling, dropout_rate=0.0,
                         cell=cell, rngs=nnx.Rngs(seed), param_dtype=jnp.float64)
  graphdef, state = nnx.split(model)
  state = jax.tree.map(lambda p: p * weight_scale, state)
  return nnx.merge(graphdef, state)


def concrete_logits(model, sentences):
  """Logits of each sentence, batched (rows padded to a power of two to reuse compilations)."""
  rows = 1 << max(0, len(sentences) - 1).bit_length()
  plan = PlanBuilder(parse_space("[]"), VOCAB).build(sentences, batch_size=rows)
  return np.asarray(predict(*nnx.split(model), plan.token_ids, plan.lengths))[:len(sentences)]


def certify_batch(model, space, plan, labels):
  graphdef, state = nnx.split(model)
  return certify_jit(graphdef, space.signature, state, plan, labels)


def on_grid(model, space, plan, labels, menu=None):
  """The certificate on the plan's reachable grid (fitted to ``menu`` if given), as certify()
  takes it (a cut signature) for LSTMs, as training batches carry it (the plan's static budgets,
  also through reverse_plan) for Bi-LSTMs: one more compilation per grid, not two."""
  if model.bidirectional:
    return certify_batch(model, space, on_reachable_grid(space, plan, menu), labels)
  return certify_batch(model, reachable_signature(space, plan, menu), plan, labels)


def assert_sound(model, space, sentences):
  """Every member of S(x) has concrete logits inside the certified bounds on the full grid, on
  the reachable grid and on a shape menu's wider padding and larger grid (each must give the
  same certificate to float rounding); returns #members."""
  space = space.restricted_to(VOCAB)
  # Fixed batch and replacement slots: examples with the same signature reuse one compilation.
  builder = PlanBuilder(space, VOCAB, min_replacement_slots=4)
  plan = builder.build(sentences, batch_size=4)
  labels = jnp.zeros((plan.shape[0],), jnp.int32)
  cert = certify_batch(model, space, plan, labels)
  reachable = on_grid(model, space, plan, labels)
  # A menu entry 4 positions wider than the plan, its first budget raised towards δ.
  cut = reachable_signature(space, plan).budgets
  raised = (min(cut[0] + 1, space.signature.budgets[0]), *cut[1:])
  menu = ShapeMenu(((plan.shape[1] + 4, raised),))
  builder.shape_menu = menu
  menu_plan = builder.build(sentences, batch_size=4)
  assert menu_plan.shape == (4, plan.shape[1] + 4)
  on_menu = on_grid(model, space, menu_plan, labels, menu)
  # The same slots by the same operations; only the matmuls' row counts differ (float rounding).
  for other, what in ((reachable, "the reachable grid"), (on_menu, "the shape menu")):
    for full, leaf in zip(jax.tree.leaves(cert), jax.tree.leaves(other)):
      np.testing.assert_allclose(full, leaf, rtol=1e-12, atol=1e-12,
                                 err_msg=f"{what} changed a certificate")
  members = 0
  for b, sentence in enumerate(sentences):
    strings = list(space.enumerate(sentence))
    members += len(strings)
    logits = concrete_logits(model, strings)
    for c in (cert, reachable, on_menu):
      lo, hi = np.asarray(c.logits.lo[b]), np.asarray(c.logits.hi[b])
      assert np.all(lo - TOL <= logits) and np.all(logits <= hi + TOL), (
          f"unsound for {sentence} under {space}: worst escape "
          f"{max(np.max(lo - logits), np.max(logits - hi))}")
      margins = logits[:, :1] - logits  # label 0
      assert np.all(np.asarray(c.margins[b]) <= margins + TOL), "margin bound is unsound"
    np.testing.assert_allclose(cert.clean_logits[b], concrete_logits(model, [sentence])[0],
                               atol=1e-9)
  return members


sentence_st = st.lists(st.sampled_from(WORDS[1:]), min_size=0, max_size=7)


@st.composite
def spaces(draw):
  kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3, unique=True))
  budgets = [draw(st.integers(1, 2)) for _ in kinds]
  pool = WORDS[1:]
  synonyms = {w: draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
              for w in draw(st.lists(st.sampled_from(pool), max_size=8))}
  spec = "[" + ",".join(f"({k},{d})" for k, d in zip(kinds, budgets)) + "]"
  return parse_space(spec, synonyms=synonyms, custom={"Swap": SWAP})
