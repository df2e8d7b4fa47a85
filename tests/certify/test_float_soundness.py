"""Certificates are proofs in floating point, for every model family and transformation shape.

The oracle is independent of the DP: ``Space.enumerate`` / ``TreeSpace.enumerate`` list every
member, the model's own concrete forward pass (jitted, in the model's dtype, at a different
batch shape than the DP) computes its logits, and every logit and logit difference must lie
inside the certificate: strictly, with no tolerance. Models are random, in float32 and float64,
with weights ×1, ×3 or ×10 and optionally saturated gates (gate biases ±15); spaces mix the
standard transformations with random user transformations of every shape s → t (s ∈ 1..4,
t ∈ 0..3, duplicating or not). Trees use the shapes a tree space accepts (1→0, 1→1, w → w w).
Sequence models come in every direction × pooling (final, mean, attention), and each is also
certified on split spaces (:func:`~arc_jax.certify.augmented.certify_split`) with both
abstractions of S_abs: the DP (ARC-A3T) and A3T's intervals.

CI runs a few cases per family (the linear-step domain's: tests/test_linear_step.py, on these
cases' generators in tests/helpers/float_soundness.py); ``-m slow`` runs many (``FUZZ_EXAMPLES``
per family, default 200) and prints how many cases and member strings it checked.
"""

import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from arc_jax import interval
from arc_jax.certify import certify_jit
from arc_jax.certify.augmented import certify_split
from arc_jax.data.trees import Tree, from_nested
from arc_jax.linear_step import LINEAR_STEP
from arc_jax.nn import predict
from arc_jax.nn.tree_models import predict_tree
from arc_jax.perturbation import PlanBuilder, parse_space
from arc_jax.perturbation.split import split_space
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space
from tests.helpers.float_soundness import (SEQUENCE_FAMILIES, SHAPES, VOCAB, WORDS,
                                           assert_contained, check_sequence, in_chunks,
                                           random_model, random_sentence, random_space,
                                           sequence_logits)


@pytest.fixture(autouse=True, scope="module")
def x64():
  """64-bit mode, so that float64 models are float64 (float32 models stay float32)."""
  with jax.enable_x64(True):
    yield


FAMILIES = SEQUENCE_FAMILIES + ("tree_after_cell", "tree_before_cell")
ABSTRACTIONS = ("dp", "interval")
"""How :func:`certify_split` abstracts S_abs on the members of S_aug (ARC-A3T, A3T)."""
TREE_SHAPES = [(1, 0), (1, 1), (1, 2)]


def random_tree(rng):
  def build(ws):
    if len(ws) == 1:
      return ws[0]
    k = int(rng.integers(1, len(ws)))
    return (build(ws[:k]), build(ws[k:]))

  tree = from_nested(build(list(rng.choice(WORDS, size=int(rng.integers(1, 5))))))
  labels = tuple(int(v) for v in rng.integers(0, 3, size=tree.num_nodes))
  return Tree(tree.tokens, tree.left, tree.right, labels)


def check_split(model, space, sentences, labels, abstraction, rng):
  """:func:`certify_split` of a random split of ``space`` (for ``"interval"``: its 1→1
  transformations abstracted) against every member of S(x): its logit box and margins, and its
  clean logits are x's; returns the members checked."""
  if abstraction == "interval":
    abstracted = [t.name for t in space.transformations if (t.s, t.t) == (1, 1)]
  else:
    abstracted = rng.choice(space.names, size=int(rng.integers(1, len(space.names) + 1)),
                            replace=False).tolist()
  split = split_space(space, abstracted)
  if not abstracted or sum(len(split.members(x)) for x in sentences) > 128:
    return 0
  out = certify_split(model, split, sentences, labels, VOCAB, abstraction=abstraction,
                      batch_size=32)
  graphdef, state = nnx.split(model)
  members = 0
  for b, sentence in enumerate(sentences):
    strings = list(space.enumerate(sentence))
    members += len(strings)
    logits = sequence_logits(graphdef, state, strings)
    assert_contained(out.logits_lo[b], out.logits_hi[b], out.margins[b], logits, labels[b],
                     f"{sentence} under {split}")
    np.testing.assert_allclose(out.clean_logits[b], logits[strings.index(sentence)],
                               rtol=1e-5, atol=1e-5)
  return members


def check_tree(model, space, trees, join):
  batch = TreeBatchBuilder(VOCAB, space, min_substitutes=4, width=8).build(
      trees, 2, max_nodes=16, num_steps=8)
  graphdef, state = nnx.split(model)
  cert = certify_jit(graphdef, space.signature, state, batch, batch.labels, join=join)
  plain = TreeBatchBuilder(VOCAB, width=32)
  members = 0
  for b, tree in enumerate(trees):
    nesteds = list(space.enumerate(tree))
    members += len(nesteds)
    def chunk_logits(chunk):
      part = plain.build([from_nested(n) for n in chunk], 64, max_nodes=32, num_steps=32)
      out = np.asarray(predict_tree(graphdef, state, part))
      return out[np.arange(len(chunk)), part.num_nodes[:len(chunk)] - 1]

    logits = in_chunks(nesteds, chunk_logits)
    root = tree.num_nodes - 1
    assert_contained(cert.logits.lo[b, root], cert.logits.hi[b, root], cert.margins[b, root],
                     logits, tree.labels[root], f"{tree} under {space}")
  return members


def run_case(seed, family, dtype, shape, domain=interval.SOUND):
  """One random case in ``domain`` (sequence families); returns the number of members checked."""
  rng = np.random.default_rng(seed)
  scale = float(rng.choice([1.0, 3.0, 10.0]))
  model = random_model(rng, family, dtype, scale, saturate=bool(rng.integers(2)))
  if family.startswith("tree"):
    space = tree_space(random_space(rng, shape, tree=True))
    trees = [random_tree(rng) for _ in range(2)]
    if max(space.count(t) for t in trees) > 3000:
      return 0
    return check_tree(model, space, trees, family.removeprefix("tree_"))
  space = random_space(rng, shape, tree=False)
  sentences = [random_sentence(rng) for _ in range(4)]
  if max(space.count(s) for s in sentences) > 3000:
    return 0
  return check_sequence(model, space, sentences, rng.integers(0, 3, size=4).tolist(), domain)


def run_split_case(seed, family, dtype, abstraction):
  """One random case of a split space (the 1→1 user transformation's shape, so that the
  interval abstraction has something to abstract); returns the number of members checked."""
  rng = np.random.default_rng(seed)
  model = random_model(rng, family, dtype, float(rng.choice([1.0, 3.0, 10.0])),
                       saturate=bool(rng.integers(2)))
  space = random_space(rng, (1, 1), tree=False)
  sentences = [random_sentence(rng) for _ in range(3)]
  if max(space.count(s) for s in sentences) > 3000:
    return 0
  return check_split(model, space, sentences, rng.integers(0, 3, size=3).tolist(), abstraction,
                     rng)


def cases(family, count, first_seed=0):
  shapes = TREE_SHAPES if family.startswith("tree") else SHAPES
  return [(first_seed + i, shapes[i % len(shapes)], (np.float32, np.float64)[i // len(shapes) % 2])
          for i in range(count)]


@pytest.mark.parametrize("family", FAMILIES)
def test_float_soundness_small(family):
  """A few cases per family (CI): float32 and float64, several transformation shapes."""
  shapes = TREE_SHAPES[1:] if family.startswith("tree") else [(1, 2), (4, 3)]
  for i, (shape, dtype) in enumerate(zip(shapes, itertools.cycle((np.float32, np.float64)))):
    run_case(1000 * i + 7, family, dtype, shape)


@pytest.mark.slow
@pytest.mark.parametrize("family,domain", [
    pytest.param(f, interval.SOUND, id=f) for f in FAMILIES] + [
    pytest.param(f, LINEAR_STEP, id=f"{f}-linear_step") for f in FAMILIES
    if not f.startswith("tree")])
def test_float_soundness_fuzz(family, domain):
  count = int(os.environ.get("FUZZ_EXAMPLES", "200"))
  members = 0
  for i, (seed, shape, dtype) in enumerate(cases(family, count)):
    members += run_case(seed, family, dtype, shape, domain)
    print(f"fuzz {family} {type(domain).__name__}: {i + 1} cases, {members} member strings, "
          "0 escapes", flush=True)


@pytest.mark.parametrize("abstraction", ABSTRACTIONS)
@pytest.mark.parametrize("family", SEQUENCE_FAMILIES)
def test_split_float_soundness_small(family, abstraction):
  """One split-space case per (model option × abstraction) pair (CI), float32 and float64."""
  index = SEQUENCE_FAMILIES.index(family) + ABSTRACTIONS.index(abstraction)
  assert run_split_case(17 + index, family, (np.float32, np.float64)[index % 2], abstraction)


@pytest.mark.slow
@pytest.mark.parametrize("abstraction", ABSTRACTIONS)
@pytest.mark.parametrize("family", SEQUENCE_FAMILIES)
def test_split_float_soundness_fuzz(family, abstraction):
  count = int(os.environ.get("FUZZ_EXAMPLES", "200")) // 4
  members = 0
  for i in range(count):
    members += run_split_case(i, family, (np.float32, np.float64)[i % 2], abstraction)
    print(f"fuzz split {family} {abstraction}: {i + 1} cases, {members} member strings, "
          "0 escapes", flush=True)


def test_escape_2_float32_weights_x10_regression():
  """Issue 12's second escape: float32 LSTMs with weights ×10. On main (931a241), without
  directed rounding, each of these seeds lets a member's logit or logit difference escape (by up
  to 3e-5); with outward rounding none does."""
  synonyms = {"good": ["bad", "film"], "movie": ["film", "x"], "bad": ["good"], "y": ["x", "!"]}
  space = parse_space("[(Sub,2),(Del,1),(Ins,1)]", synonyms=synonyms,
                      stopwords=("a", "the", "of")).restricted_to(VOCAB)
  for seed in (0, 1, 2):
    rng = np.random.default_rng(seed)
    model = random_model(rng, "lstm", np.float32, 10.0, saturate=False)
    sentences = [random_sentence(rng) for _ in range(4)]
    check_sequence(model, space, sentences, rng.integers(0, 3, size=4).tolist())


@pytest.mark.parametrize("family", ["lstm", "bilstm", "mean", "tree_after_cell"])
def test_clean_logits_are_the_concrete_forward_pass(family):
  """A certificate's clean logits are x's own. The sound domain widens the point x at every
  rounding and the recurrence amplifies the widening along a long input (here 60 words: the
  logit box of S(x) = {x} is checked to be over 20 times the tolerance wide), so a point of that
  box is not x's logits (reading its lower ends fails this test for every family): the DPs run
  the concrete forward pass for them (``Domain.exact_on_points``)."""
  rng = np.random.default_rng(0)
  model = random_model(rng, family, np.float32, 3.0, saturate=False)
  graphdef, state = nnx.split(model)
  words = rng.choice(WORDS, size=60).tolist()
  if family.startswith("tree"):
    nested = words[0]
    for word in words[1:]:  # a caterpillar: 59 cell steps from the first leaf to the root
      nested = (nested, word)
    tree = from_nested(nested)
    tree = Tree(tree.tokens, tree.left, tree.right, (0,) * tree.num_nodes)
    space = tree_space(parse_space("[]"))
    batch = TreeBatchBuilder(VOCAB, space, width=8).build([tree], 1, max_nodes=128,
                                                          num_steps=64)
    cert = certify_jit(graphdef, space.signature, state, batch, batch.labels)
    concrete = predict_tree(graphdef, state, batch)
    real = np.arange(batch.shape[1]) < tree.num_nodes
    logits, clean, concrete = ((np.asarray(a)[:, real]) for a in (cert.logits.hi - cert.logits.lo,
                                                                   cert.clean_logits, concrete))
  else:
    space = parse_space("[]")
    plan = PlanBuilder(space, VOCAB).build([words], batch_size=1)
    cert = certify_jit(graphdef, space.signature, state, plan, jnp.zeros(1, jnp.int32))
    concrete = predict(graphdef, state, plan.token_ids, plan.lengths)
    logits, clean = np.asarray(cert.logits.hi - cert.logits.lo), np.asarray(cert.clean_logits)
  assert np.max(logits) > 2e-4, "the box of x is too narrow for this test to fail"
  np.testing.assert_allclose(clean, concrete, rtol=1e-5, atol=1e-5)
