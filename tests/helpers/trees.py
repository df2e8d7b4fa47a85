"""Random binary trees (hypothesis), as nested pairs of words, over the tree tests' word list."""

from hypothesis import strategies as st

WORDS = ("a", "the", "to", "good", "movie", "film", "fine", "x")


@st.composite
def nested_trees(draw, max_leaves=6, words=WORDS, min_leaves=1):
  """Random binary trees with min_leaves..max_leaves leaves, as nested pairs."""
  n = draw(st.integers(min_leaves, max_leaves))
  leaves = draw(st.lists(st.sampled_from(words), min_size=n, max_size=n))

  def build(ws):
    if len(ws) == 1:
      return ws[0]
    k = draw(st.integers(1, len(ws) - 1))
    return (build(ws[:k]), build(ws[k:]))

  return build(leaves)
