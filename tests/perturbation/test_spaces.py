"""Perturbation spaces: enumeration and counting against a brute force, reversal, restriction,
decomposition and the spec-string parser (issue 2)."""

import itertools
import math
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arc_jax.perturbation import STANDARD_NAMES, Space, SpecError, custom, parse_space
from tests.helpers.reference_spaces import REF_SIZES, lexicons, ref_replacements, sentences

FAST = settings(max_examples=60, deadline=None)


def _swap_match(w):
  return w[0] != w[1]


def _swap_replace(w):
  return [(w[1], w[0])]


def swap():
  """The custom transformation of the issue: swap two adjacent (different) tokens, 2→2."""
  return custom("Swap", 2, 2, match=_swap_match, replace=_swap_replace)


def drop_after_the():
  """An asymmetric custom transformation (2→1): "the w" → "w"."""
  return custom("Shorten", 2, 1, match=lambda w: w[0] == "the", replace=lambda w: [(w[1],)])


CUSTOM = {"Swap": swap(), "Shorten": drop_after_the()}
ALL_NAMES = tuple(n for n in STANDARD_NAMES if n != "Dup") + tuple(CUSTOM)


def ref_spec(name, delta, synonyms):
  """(s, t, window → replacement set, δ) for the brute force, independent of arc_jax."""
  if name == "Swap":
    return 2, 2, lambda w: {(w[1], w[0])} if w[0] != w[1] else set(), delta
  if name == "Shorten":
    return 2, 1, lambda w: {(w[1],)} if w[0] == "the" else set(), delta
  s, t = REF_SIZES[name]
  return s, t, lambda w: ref_replacements(name, w, synonyms), delta


def brute_force(tokens, specs):
  """All sets of non-overlapping matched windows within the budgets, with all replacement choices.

  Args:
    tokens: the string x.
    specs: (s, t, window → set of replacements, δ) per transformation.
  Returns:
    (number of application choices, set of resulting strings).
  """
  tokens = tuple(tokens)
  n = len(tokens)
  cands = [(i, k) for k, (s, _, f, _) in enumerate(specs) for i in range(n - s + 1)
           if f(tokens[i:i + s])]
  max_apps = min(n, sum(d for *_, d in specs))
  count, strings = 0, set()
  for size in range(max_apps + 1):
    for combo in itertools.combinations(cands, size):
      covered = [p for i, k in combo for p in range(i, i + specs[k][0])]
      if len(covered) != len(set(covered)):
        continue
      used = Counter(k for _, k in combo)
      if any(used[k] > specs[k][3] for k in used):
        continue
      starts = {i: k for i, k in combo}
      options = [sorted(specs[k][2](tokens[i:i + specs[k][0]])) for i, k in combo]
      for pick in itertools.product(*options):
        chosen = dict(zip((i for i, _ in combo), pick))
        out, i = [], 0
        while i < n:
          if i in starts:
            out.extend(chosen[i])
            i += specs[starts[i]][0]
          else:
            out.append(tokens[i])
            i += 1
        count += 1
        strings.add(tuple(out))
  return count, strings


def build_space(names_deltas, synonyms):
  spec = "[" + ",".join(f"({n},{d})" for n, d in names_deltas) + "]"
  return parse_space(spec, synonyms=synonyms, custom=CUSTOM)


def check_against_brute_force(tokens, names_deltas, synonyms):
  space = build_space(names_deltas, synonyms)
  listed = list(space.enumerate(tokens))
  count, strings = brute_force(tokens, [ref_spec(n, d, synonyms) for n, d in names_deltas])
  assert listed[0] == tuple(tokens)
  assert len(listed) == len(set(listed)), "enumerate yielded a string twice"
  assert set(listed) == strings
  assert space.count(tokens) == count


# ---------------------------------------------------------------------------------------------
# Enumeration and counting against the brute force.

@pytest.mark.parametrize("name", ALL_NAMES)
@FAST
@given(tokens=sentences(), synonyms=lexicons(), delta=st.integers(0, 3))
def test_single_transformation_matches_brute_force(name, tokens, synonyms, delta):
  """S = {(T, δ)} for each standard transformation and the custom ones: enumerate and count."""
  check_against_brute_force(tokens, [(name, delta)], synonyms)


@settings(max_examples=150, deadline=None)
@given(tokens=sentences(), synonyms=lexicons(),
       names=st.lists(st.sampled_from(ALL_NAMES), min_size=2, max_size=4, unique=True),
       deltas=st.lists(st.integers(1, 2), min_size=4, max_size=4))
def test_combined_space_matches_brute_force(tokens, synonyms, names, deltas):
  """Spaces of 2–4 different transformations (overlap and budgets interact)."""
  check_against_brute_force(tokens, list(zip(names, deltas)), synonyms)


@pytest.mark.parametrize("spec", ["[(Del,1),(Sub,1)]", "[(Sub,1),(Del,1)]"])
def test_paper_example(spec):
  """Paper Example 2.2: x = "to the movie", Del on {to, the}, Sub movie → {film, movies}."""
  space = parse_space(spec, synonyms={"movie": ["film", "movies"]}, stopwords={"to", "the"})
  expected = {"to the movie", "the movie", "to movie", "to the film", "to the movies",
              "the film", "the movies", "to film", "to movies"}
  got = [" ".join(y) for y in space.enumerate("to the movie".split())]
  assert len(got) == len(expected) and set(got) == expected
  # 1 (nothing) + 2 (one Del) + 2 (one Sub) + 2·2 (both): every choice gives a new string.
  assert space.count("to the movie".split()) == 9


S_REVIEW = "[(Trans1,1),(Trans2,1),(Trans3,1),(Trans4,1),(Sub,2)]"


def test_trans3_review_space():
  """S_review on "one of the best films !": Trans3 and Sub on "best" exclude each other."""
  synonyms = {"best": ["finest", "greatest"], "films": ["movies"], "good": ["fine"]}
  x = "one of the best films !".split()
  space = parse_space(S_REVIEW, synonyms=synonyms)
  got = list(space.enumerate(x))
  names_deltas = [("Trans1", 1), ("Trans2", 1), ("Trans3", 1), ("Trans4", 1), ("Sub", 2)]
  count, strings = brute_force(x, [ref_spec(n, d, synonyms) for n, d in names_deltas])
  assert set(got) == strings and len(got) == len(strings)
  # By hand: without Trans3, Sub on {best (2 ways), films (1)} with ≤ 2 subs gives 1+2+1+2 = 6,
  # with Trans3 only films is left: 2; and "!" may be doubled or not: (6 + 2) · 2 = 16.
  assert space.count(x) == count == 16 == len(got)
  as_text = {" ".join(y) for y in got}
  assert "the best movies ! !" in as_text
  assert "one of the greatest movies ! !" in as_text
  assert "the finest films !" not in as_text  # Sub inside a Trans3 window would overlap


def test_empty_string_and_empty_space():
  """S(ε) = {ε}; the empty space gives {x}; δ = 0 gives {x}."""
  assert list(parse_space("[(Del,2),(Ins,1)]").enumerate(())) == [()]
  assert parse_space("[(Del,2),(Ins,1)]").count(()) == 1
  x = tuple("to the movie".split())
  assert list(parse_space("[]").enumerate(x)) == [x] and parse_space("[]").count(x) == 1
  assert list(parse_space("[(Del,0),(Ins,0)]").enumerate(x)) == [x]


def test_count_closed_form_50_tokens_ins_sub():
  """n = 50, [(Sub,5),(Ins,5)], r synonyms per token: Σ_{a,b≤5} C(n,a)·C(n−a,b)·r^a."""
  n, r = 50, 3
  words = [f"w{i}" for i in range(n)]
  synonyms = {w: [f"{w}_{j}" for j in range(r)] for w in words}
  space = parse_space("[(Sub,5),(Ins,5)]", synonyms=synonyms)
  start = time.perf_counter()
  got = space.count(words)
  print(f"count, n=50, [(Sub,5),(Ins,5)]: {time.perf_counter() - start:.4f} s")
  want = sum(math.comb(n, a) * math.comb(n - a, b) * r ** a for a in range(6) for b in range(6))
  assert got == want


def test_count_closed_form_50_tokens_swap_sub():
  """n = 50, [(Swap,5),(Sub,5)] with all adjacent tokens different and r synonyms each.

  a non-overlapping 2-windows and b substituted singles among n positions: (n−a)! / (a! b!
  (n−2a−b)!) placements (arrange a dominoes, b marked and n−2a−b plain tokens), times r^b.
  """
  n, r = 50, 2
  words = [f"w{i}" for i in range(n)]
  synonyms = {w: [f"{w}_{j}" for j in range(r)] for w in words}
  space = parse_space("[(Swap,5),(Sub,5)]", synonyms=synonyms, custom=CUSTOM)
  start = time.perf_counter()
  got = space.count(words)
  print(f"count, n=50, [(Swap,5),(Sub,5)]: {time.perf_counter() - start:.4f} s")
  fact = math.factorial
  want = sum(fact(n - a) // (fact(a) * fact(b) * fact(n - 2 * a - b)) * r ** b
             for a in range(6) for b in range(6))
  assert got == want


# ---------------------------------------------------------------------------------------------
# Reversal and restriction.

@settings(max_examples=120, deadline=None)
@given(tokens=sentences(), synonyms=lexicons(),
       names=st.lists(st.sampled_from(ALL_NAMES), min_size=1, max_size=4, unique=True),
       deltas=st.lists(st.integers(1, 2), min_size=4, max_size=4))
def test_reversed_space(tokens, synonyms, names, deltas):
  """S^R(reverse(x)) = {reverse(y) : y ∈ S(x)}, with the same number of application choices."""
  space = build_space(list(zip(names, deltas)), synonyms)
  rev = space.reversed()
  assert rev.names == space.names and rev.budgets == space.budgets
  forward = {y[::-1] for y in space.enumerate(tokens)}
  backward = list(rev.enumerate(tokens[::-1]))
  assert set(backward) == forward and len(backward) == len(forward)
  assert rev.count(tokens[::-1]) == space.count(tokens)


@settings(max_examples=100, deadline=None)
@given(tokens=sentences(), synonyms=lexicons(), data=st.data(),
       names=st.lists(st.sampled_from(ALL_NAMES), min_size=1, max_size=3, unique=True),
       deltas=st.lists(st.integers(1, 2), min_size=3, max_size=3))
def test_restricted_space(tokens, synonyms, data, names, deltas):
  """S|V(x) = S(x) ∩ V* for x ∈ V*; windows and count drop exactly the out-of-V replacements."""
  all_words = sorted(set(tokens) | {w for ws in synonyms.values() for w in ws} | {"the", "a"})
  vocab = set(tokens) | set(data.draw(st.lists(st.sampled_from(all_words), max_size=8)))
  names_deltas = list(zip(names, deltas))
  space = build_space(names_deltas, synonyms)
  restricted = space.restricted_to(vocab)
  assert restricted.names == space.names and restricted.budgets == space.budgets
  assert set(restricted.enumerate(tokens)) == {
      y for y in space.enumerate(tokens) if all(w in vocab for w in y)}
  for full, kept in zip(space.windows(tokens), restricted.windows(tokens)):
    for reps, reps_kept in zip(full, kept):
      assert reps_kept == tuple(r for r in reps if all(w in vocab for w in r))

  def in_vocab(spec):
    s, t, f, d = spec
    return s, t, lambda w: {r for r in f(w) if all(tok in vocab for tok in r)}, d

  count, _ = brute_force(tokens, [in_vocab(ref_spec(n, d, synonyms)) for n, d in names_deltas])
  assert restricted.count(tokens) == count


# ---------------------------------------------------------------------------------------------
# Decomposition and the Space value.

@given(budgets=st.lists(st.integers(0, 3), max_size=4))
@settings(max_examples=40, deadline=None)
def test_decomposition(budgets):
  """dec(S): ∏(δ+1) distinct rows, row 0 zero, last row δ, strictly lexicographic, in bounds."""
  names = ["Del", "Ins", "Trans1", "Trans4"][:len(budgets)]
  space = Space(tuple(parse_space(f"[({n},0)]").transformations[0] for n in names), tuple(budgets))
  dec = space.decomposition()
  assert np.issubdtype(dec.dtype, np.integer)
  assert dec.shape == (math.prod(d + 1 for d in budgets), len(budgets))
  assert (dec[0] == 0).all() and tuple(dec[-1]) == tuple(budgets)
  assert (dec >= 0).all() and (dec <= np.asarray(budgets, int)).all()
  rows = [tuple(r) for r in dec]
  assert all(a < b for a, b in zip(rows, rows[1:]))  # strictly increasing ⇒ distinct and sorted


def test_space_rejects_bad_values():
  """Duplicated names, negative or non-integer budgets and a budget-count mismatch are errors."""
  dele, ins = parse_space("[(Del,1),(Ins,1)]").transformations
  with pytest.raises(ValueError, match="once"):
    Space((dele, dele), (1, 1))
  with pytest.raises(ValueError, match="non-negative"):
    Space((dele,), (-1,))
  with pytest.raises(ValueError, match="non-negative"):
    Space((dele,), (1.5,))
  with pytest.raises(ValueError, match="one budget"):
    Space((dele, ins), (1,))


# ---------------------------------------------------------------------------------------------
# Parser.

def test_parser_paper_specs_and_whitespace():
  """The paper's spec strings parse, in order, whatever the whitespace."""
  syn = {"good": ["fine"]}
  space = parse_space("[(Del,2),(Sub,2)]", synonyms=syn)
  assert space.names == ("Del", "Sub") and space.budgets == (2, 2)
  review = parse_space(S_REVIEW, synonyms=syn)
  assert review.names == ("Trans1", "Trans2", "Trans3", "Trans4", "Sub")
  assert review.budgets == (1, 1, 1, 1, 2)
  for spec in [" [ ( Sub , 2 ) ,( Del,2 ) ] ", "[(Sub,2), (Del,2)]", "\t[\n(Sub,\t2),(Del,2)]\n"]:
    parsed = parse_space(spec, synonyms=syn)
    assert parsed.names == ("Sub", "Del") and parsed.budgets == (2, 2)
  assert parse_space("[ ]").names == () and parse_space("[(Dup,3)]").names == ("Dup",)
  assert parse_space("[(Ins,1),(Dup,1)]").budgets == (1, 1)


def test_parser_unknown_name_lists_valid_names():
  """An unknown name is reported with every valid name, custom ones included."""
  with pytest.raises(ValueError) as err:
    parse_space("[(Del,1),(Delete,2)]", custom={"Swap": swap()})
  msg = str(err.value)
  assert "Delete" in msg
  for name in STANDARD_NAMES + ("Swap",):
    assert name in msg


def test_parser_sub_needs_lexicon():
  """Sub without synonyms is a clear error; with them it works."""
  with pytest.raises(ValueError, match="synonym"):
    parse_space("[(Del,1),(Sub,1)]")
  assert parse_space("[(Sub,1)]", synonyms={}).names == ("Sub",)


@pytest.mark.parametrize("spec, bad", [
    ("[(Del,-1)]", "-1"),
    ("[(Del, 1.5)]", "1.5"),
    ("[(Del,2.)]", "2."),
    ("[(Del,  -3),(Sub,1)]", "-3"),
])
def test_parser_bad_budget(spec, bad):
  """Negative and non-integer budgets are SpecErrors naming the budget and its position."""
  with pytest.raises(SpecError) as err:
    parse_space(spec, synonyms={})
  assert bad in str(err.value) and f"position {spec.index(bad)}" in str(err.value)


@pytest.mark.parametrize("spec, pos", [
    ("(Del,2)", 0),                    # no brackets
    ("[(Del 2)]", 6),                  # missing comma
    ("[(Del,2)(Sub,2)]", 8),           # missing comma between items
    ("[(Del,2),]", 9),                 # trailing comma
    ("[(Del,2)", 8),                   # unterminated
    ("[(Del,2)] extra", 10),           # trailing text
    ("[(Del,x)]", 6),                  # budget is not a number
    ("[(2,Del)]", 2),                  # swapped fields
    ("[(Del,2);(Sub,2)]", 8),          # unexpected character
    ("[(Del,2)] ]", 10),
    ("", 0),
    ("[(Del,2),(Sub,2)]]", 17),
])
def test_parser_syntax_error_position(spec, pos):
  """Malformed specs raise SpecError and report the offending position."""
  with pytest.raises(SpecError, match=rf"position {pos}\b"):
    parse_space(spec, synonyms={})


def test_parser_refuses_a_custom_transformation_under_a_standard_name():
  """A standard name means the standard transformation everywhere: reusing it is refused."""
  with pytest.raises(ValueError, match="'Del' is the name of a standard transformation"):
    custom("Del", 1, 0, match=lambda w: w[0] == "movie", replace=lambda w: [()])
  mine = custom("MyDel", 1, 0, match=lambda w: w[0] == "movie", replace=lambda w: [()])
  with pytest.raises(ValueError, match=r"custom=\{'Del': ...\} reuses the name"):
    parse_space("[(Del,1)]", custom={"Del": mine})
  space = parse_space("[(MyDel,1)]", custom={"MyDel": mine})
  assert set(space.enumerate(("the", "movie"))) == {("the", "movie"), ("the",)}


def test_parser_duplicate_name():
  """A transformation given twice is an error (budgets are not silently overwritten)."""
  with pytest.raises(SpecError, match="Del"):
    parse_space("[(Del,1),(Sub,1),(Del,2)]", synonyms={})


def test_parser_never_evaluates_python():
  """Python expressions in a spec are rejected by the grammar, not executed."""
  with pytest.raises((SpecError, ValueError)):
    parse_space("[(__import__('os').system('true'),1)]")
