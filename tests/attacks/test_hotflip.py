"""HotFlip beam search: agreement with a direct port of the original's per-candidate algorithm,
membership of every candidate in S(x), a constructed attack the first-order score must find,
CF ≤ EX ≤ HF ≤ Acc per example, and a bounded number of gradient compilations."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

import arc_jax
from arc_jax.attacks import (adversarial_examples, exhaustive_robustness, hotflip_candidates,
                             hotflip_robustness, hotflip_search)
from arc_jax.attacks import hotflip
from arc_jax.certify import certify
from arc_jax.nn import LSTMClassifier, predict
from arc_jax.perturbation import bucket, parse_space
from tests.helpers.reference_spaces import ALPHABET, CHUNKS, lexicons, sentences

WORDS = ["<pad>"] + sorted(set(ALPHABET) | {"great", "fine", "awful", "film"})
VOCAB = {w: i for i, w in enumerate(WORDS)}
SYNONYMS = {"good": ["great", "fine", "bad"], "bad": ["awful"], "movie": ["film"],
            "best": ["good", "finest"]}  # "finest" is outside the vocabulary
SWAP = arc_jax.custom("Swap", 2, 2, match=lambda w: w[0] != w[1], replace=lambda w: [w[::-1]])
KINDS = ["Del", "Ins", "Sub", "Trans1", "Trans2", "Trans3", "Trans4", "Swap"]
PAD_WIDTH = 32  # the reference's gradients: one padded width, one compilation per model


@pytest.fixture(autouse=True, scope="module")
def float64():
  """Float64 for this module only: scores are compared with an independent computation."""
  with jax.enable_x64(True):
    yield


def space_of(spec, synonyms=SYNONYMS):
  return parse_space(spec, synonyms=synonyms, custom={"Swap": SWAP})


def make_model(seed, bidirectional=False, pooling="final", weight_scale=1.0, embed_dim=4):
  rng = np.random.default_rng(seed)
  model = LSTMClassifier(rng.normal(size=(len(WORDS), embed_dim)), hidden=5, projection=4,
                         head_hidden=4, bidirectional=bidirectional, pooling=pooling,
                         dropout_rate=0.0, rngs=nnx.Rngs(seed), param_dtype=jnp.float64)
  graphdef, state = nnx.split(model)
  return nnx.merge(graphdef, jax.tree.map(lambda p: p * weight_scale, state))


def random_sentences(rng, count, max_len=9):
  """Sentences of CHUNKS (phrases make the multi-token transformations match), non-empty."""
  out = []
  for _ in range(count):
    chunks = rng.choice(np.array(CHUNKS, dtype=object), size=rng.integers(1, 5))
    out.append(tuple(" ".join(chunks).split())[:max_len])
  return out


def clean_predictions(model, strings):
  graphdef, state = nnx.split(model)
  return np.array([int(np.argmax(predict(graphdef, state, *padded([s]))[0])) for s in strings])


def padded(strings, width=PAD_WIDTH):
  ids = np.zeros((len(strings), width), np.int32)
  for b, s in enumerate(strings):
    ids[b, :len(s)] = [VOCAB[w] for w in s]
  return ids, np.array([len(s) for s in strings], np.int32)


@functools.partial(jax.jit, static_argnums=0)
def _embedding_gradient(graphdef, state, ids, lengths, label):
  model = nnx.merge(graphdef, state)

  def loss(e):
    logits = model.head(model.features_from_embeddings(e, lengths))
    return -jax.nn.log_softmax(logits)[0, label]

  return jax.grad(loss)(model.embed(ids))[0]


def embedding_gradient(model, tokens, label):
  """∇_e L (len(tokens), E) of one sentence, computed on its own."""
  graphdef, state = nnx.split(model)
  return np.asarray(_embedding_gradient(graphdef, state, *padded([tokens]), label))[:len(tokens)]


def reference_search(model, space, x, y, beam):
  """The original's GeneralHotFlipAttack.gen_adv (docs/ORIGINAL.md §5), one candidate at a time:
  strings with a position map from the original (None = rewritten), scores from the gradient of
  each candidate on its own. The beam keeps distinct strings (ties: the earlier entry)."""
  space = space.restricted_to(VOCAB)
  table = np.asarray(model.embeddings[...])

  def embed(tokens, length):
    out = np.zeros((length, table.shape[1]))
    out[:len(tokens)] = table[[VOCAB[w] for w in tokens]]
    return out

  members = [{"x": x, "score": 0.0, "map": list(range(len(x)))}]
  for t, delta in zip(space.transformations, space.budgets):
    spans = [(a, a + t.s) for a in range(len(x) - t.s + 1) if t.replacements(x[a:a + t.s])]
    for m in members:
      m["expanded"] = False
    for _ in range(delta):
      pool = list(members)
      for m in members:
        if m["expanded"]:
          continue
        m["expanded"] = True
        cur = m["x"]
        if not cur:
          continue
        grad = embedding_gradient(model, cur, y)
        for a, b in spans:
          if any(m["map"][i] is None for i in range(a, b)):
            continue
          ax, bx = m["map"][a], m["map"][b - 1] + 1
          for r in t.replacements(cur[ax:bx]):
            new = cur[:ax] + r + cur[bx:]
            old_e = embed(cur[ax:], len(cur) - ax)
            new_e = embed(new[ax:min(len(new), len(cur))], len(cur) - ax)
            score = m["score"] + float(np.sum(grad[ax:] * (new_e - old_e)))
            grow = len(new) - len(cur)
            new_map = (m["map"][:a] + [None] * (b - a)
                       + [p if p is None else p + grow for p in m["map"][b:]])
            pool.append({"x": new, "score": score, "map": new_map, "expanded": False})
      pool.sort(key=lambda c: -c["score"])
      members, seen = [], set()
      for c in pool:
        if c["x"] not in seen:
          seen.add(c["x"])
          members.append(c)
          if len(members) == beam:
            break
  return [(c["x"], c["score"]) for c in members]


@pytest.mark.parametrize("spec, seed, beam, bidirectional, pooling", [
    ("[(Del,2),(Sub,2)]", 0, 5, False, "final"),
    ("[(Trans1,1),(Trans2,1),(Trans3,1),(Trans4,1),(Sub,2)]", 1, 3, True, "mean"),
    ("[(Ins,2),(Swap,1),(Del,1)]", 2, 2, False, "final"),
])
def test_matches_the_original_algorithm_run_one_candidate_at_a_time(spec, seed, beam,
                                                                   bidirectional, pooling):
  model = make_model(seed, bidirectional, pooling)
  graphdef, state = nnx.split(model)
  rng = np.random.default_rng(seed)
  xs = random_sentences(rng, 7)
  ys = rng.integers(0, 2, size=len(xs))
  space = space_of(spec)

  found = hotflip_search(graphdef, state, space, xs, ys, VOCAB, beam=beam, batch_size=3)

  changed = 0
  for x, y, candidates in zip(xs, ys, found):
    expected = reference_search(model, space, x, int(y), beam)
    assert [c.tokens for c in candidates] == [s for s, _ in expected]
    np.testing.assert_allclose([c.score for c in candidates], [v for _, v in expected],
                               rtol=1e-9, atol=1e-12)
    changed += sum(c.tokens != x for c in candidates)
  assert changed >= len(xs)  # the spaces do act on these sentences


@settings(max_examples=30, deadline=None)
@given(x=sentences(max_len=6), synonyms=lexicons(),
       kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=4, unique=True),
       budgets=st.lists(st.integers(0, 2), min_size=4, max_size=4))
def test_every_candidate_is_a_distinct_member_of_the_space(x, synonyms, kinds, budgets,
                                                           membership_model):
  spec = "[" + ",".join(f"({k},{d})" for k, d in zip(kinds, budgets)) + "]"
  space = space_of(spec, synonyms)
  graphdef, state = membership_model

  beam = 3
  (candidates,) = hotflip_search(graphdef, state, space, [x], [0], VOCAB, beam=beam, batch_size=1)

  members = set(space.restricted_to(VOCAB).enumerate(x))
  strings = [c.tokens for c in candidates]
  assert 1 <= len(strings) <= beam and len(set(strings)) == len(strings)
  assert set(strings) <= members
  for c in candidates:
    uses = np.bincount([p.transformation for p in c.picks], minlength=len(kinds))
    assert np.all(uses <= budgets[:len(kinds)])
  scores = [c.score for c in candidates]
  assert scores == sorted(scores, reverse=True)


@pytest.fixture(scope="module")
def membership_model(float64):
  return nnx.split(make_model(7))


def test_finds_the_constructed_substitution_that_flips_the_label():
  """One synonym moves e(good) along ∇_e L far enough to flip the label, the others move it
  against the gradient: the first-order score ranks the flip first, so beam 1 finds it."""
  model = make_model(5, weight_scale=2.0)
  x = ("it", "is", "good", "!")
  (y,) = clean_predictions(model, [x])
  grad = embedding_gradient(model, x, y)[2]
  assert np.linalg.norm(grad) > 1e-3
  direction = grad / np.linalg.norm(grad)
  table = np.asarray(model.embeddings[...]).copy()
  base = table[VOCAB["good"]]
  table[VOCAB["great"]] = base - 0.5 * direction
  table[VOCAB["fine"]] = base - 1.0 * direction
  for size in np.geomspace(0.5, 64, 30):
    table[VOCAB["bad"]] = base + size * direction
    model.embeddings[...] = jnp.asarray(table)
    if clean_predictions(model, [substituted(x, "bad")])[0] != y:
      break
  else:
    raise AssertionError("the construction did not flip the label")
  flipped = substituted(x, "bad")
  graphdef, state = nnx.split(model)
  space = space_of("[(Sub,1)]")

  exhaustive = exhaustive_robustness(functools.partial(predict, graphdef, state), space, [x], [y],
                                     VOCAB, batch_size=5)
  assert not exhaustive.robust[0]
  assert adversarial_examples(graphdef, state, space, [x], [y], VOCAB, batch_size=1) == [flipped]
  result = hotflip_robustness(graphdef, state, space, [x], [y], VOCAB, beam=5, batch_size=1)
  assert result.correct[0] and not result.robust[0]
  assert result.counterexamples[0] == flipped
  assert result.candidates[0] == (flipped, x, substituted(x, "great"), substituted(x, "fine"))


def substituted(x, word):
  return x[:2] + (word,) + x[3:]


def test_certified_exhaustive_hotflip_and_clean_accuracy_are_ordered():
  model = make_model(5, weight_scale=3.0)
  graphdef, state = nnx.split(model)
  rng = np.random.default_rng(5)
  xs = random_sentences(rng, 40, max_len=7)
  clean = clean_predictions(model, xs)
  ys = np.where(rng.random(len(xs)) < 0.85, clean, 1 - clean)
  space = space_of("[(Del,1),(Ins,1),(Sub,2)]")

  cf = certify(model, space, xs, ys, VOCAB)["certified"]
  ex = exhaustive_robustness(functools.partial(predict, graphdef, state), space, xs, ys, VOCAB,
                             certified=cf, shortcut=False, batch_size=40)
  hf = hotflip_robustness(graphdef, state, space, xs, ys, VOCAB, beam=5, batch_size=8)

  assert not ex.audit_failures
  np.testing.assert_array_equal(hf.correct, ex.correct)
  assert np.all(cf <= ex.robust) and np.all(ex.robust <= hf.robust)
  assert np.all(hf.robust <= hf.correct)
  assert cf.sum() <= ex.robust.sum() <= hf.robust.sum() <= hf.correct.sum()
  # Non-trivial: HotFlip breaks some examples, and misses some that enumeration breaks.
  assert (hf.correct & ~hf.robust).any() and (hf.robust & ~ex.robust).any()
  members = space.restricted_to(VOCAB)
  for i in np.flatnonzero(hf.correct & ~hf.robust):
    assert hf.counterexamples[i] in set(members.enumerate(xs[i]))
    assert clean_predictions(model, [hf.counterexamples[i]])[0] != ys[i]
  assert all(not c for c, ok in zip(hf.candidates, hf.correct) if not ok)


def test_compiles_once_per_length_bucket(monkeypatch):
  """The attack's jitted gradient call is traced at most once per length bucket, not once per
  sentence: the pure function it jits, wrapped in chex.assert_max_traces, is jitted afresh as
  the library jits it (graphdef static) in its place."""
  model = make_model(11)
  graphdef, state = nnx.split(model)
  rng = np.random.default_rng(11)
  xs = [tuple(rng.choice(["the", "a", "good", "movie", "is", "bad"], size=n))
        for n in range(1, 17)] * 3
  space = space_of("[(Del,2),(Sub,2)]")
  widths = {bucket(len(x)) for x in xs}  # Del and Sub never lengthen a string
  assert len(widths) < len(xs)
  chex.clear_trace_counter()
  pure = hotflip._first_order_terms.__wrapped__
  monkeypatch.setattr(hotflip, "_first_order_terms",
                      jax.jit(chex.assert_max_traces(pure, n=len(widths)), static_argnums=0))

  found = hotflip_candidates(graphdef, state, space, xs, np.zeros(len(xs)), VOCAB, beam=2,
                             batch_size=8)

  assert all(len(s) <= len(x) for x, candidates in zip(xs, found) for s in candidates)


def test_state_tuple_empty_space_and_empty_sentence():
  model = make_model(4)
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  xs = [("good", "movie"), (), ("the", "best", "!")]
  space = space_of("[(Sub,1),(Del,1)]")
  single = hotflip_candidates(*nnx.split(model), space, xs, [0, 1, 0], VOCAB, beam=3)
  assert hotflip_candidates(graphdef, (params, rest), space, xs, [0, 1, 0], VOCAB,
                            beam=3) == single
  assert single[1] == [()]
  assert hotflip_candidates(graphdef, (params, rest), space_of("[]"), xs, [0, 1, 0],
                            VOCAB) == [[x] for x in xs]
  assert hotflip_candidates(graphdef, (params, rest), space, [], [], VOCAB) == []


def test_invalid_inputs_name_the_problem():
  graphdef, state = nnx.split(make_model(4))
  space = space_of("[(Sub,1)]")
  with pytest.raises(ValueError, match="beam"):
    hotflip_candidates(graphdef, state, space, [("good",)], [0], VOCAB, beam=0)
  with pytest.raises(ValueError, match="batch_size"):
    hotflip_robustness(graphdef, state, space, [("good",)], [0], VOCAB, batch_size=0)
  with pytest.raises(ValueError, match="labels"):
    hotflip_candidates(graphdef, state, space, [("good",)], [0, 1], VOCAB)
  with pytest.raises(KeyError, match="Sentence 1 .*'zebra'"):
    hotflip_robustness(graphdef, state, space, [("good",), ("zebra",)], [0, 0], VOCAB)
