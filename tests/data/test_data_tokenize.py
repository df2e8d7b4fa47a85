"""PTB un-escaping, whitespace and Treebank-style tokenisation."""

import pytest

from arc_jax.data import tokenize


@pytest.mark.parametrize("text, expected", [
    ("-lrb- a -rrb-", "( a )"),
    ("-LRB- a -RRB-", "( a )"),
    (r"writer\/director", "writer/director"),
    (r"\*\*\*", "***"),
    ("-lsb- x -rsb- -lcb- y -rcb-", "[ x ] { y }"),
    ("no escapes here", "no escapes here"),
])
def test_normalize_ptb(text, expected):
  assert tokenize.normalize_ptb(text) == expected


def test_whitespace_tokens_lower_and_unescape():
  assert tokenize.whitespace_tokens("The -LRB- Film -RRB- is good \\/ bad ") == (
      "the", "(", "film", ")", "is", "good", "/", "bad")
  assert tokenize.whitespace_tokens("") == ()


@pytest.mark.parametrize("sentence, expected", [
    ("They'll save $3.88, won't they?",
     ["They", "'ll", "save", "$", "3.88", ",", "wo", "n't", "they", "?"]),
    ('"Good muffins" cost 1,000 in New York.',
     ["``", "Good", "muffins", "''", "cost", "1,000", "in", "New", "York", "."]),
    ("hi, my name can't hello,", ["hi", ",", "my", "name", "ca", "n't", "hello", ","]),
    ("I cannot believe it's gonna work...", ["I", "can", "not", "believe", "it", "'s", "gon",
                                             "na", "work", "..."]),
    ("Mr. Smith (the actor) said: 'wow' -- really!",
     ["Mr.", "Smith", "(", "the", "actor", ")", "said", ":", "'wow", "'", "--", "really", "!"]),
    ("She'd say 'tis the end.", ["She", "'d", "say", "'t", "is", "the", "end", "."]),
    ("Ends with a quote.\"", ["Ends", "with", "a", "quote", ".", "''"]),
    ("", []),
])
def test_treebank_tokenize(sentence, expected):
  assert tokenize.treebank_tokenize(sentence) == expected


def test_split_sentences():
  assert tokenize.split_sentences("One. Two!  Three?\nFour") == ["One.", "Two!", "Three?", "Four"]
  assert tokenize.split_sentences("  ") == []


def test_review_tokens_remove_breaks_and_split_every_sentence():
  text = 'Great film.<br /><br />I didn\'t like the "ending". It was OK!<BR>Really'
  assert tokenize.review_tokens(text) == (
      "great", "film", ".", "i", "did", "n't", "like", "the", "``", "ending", "''", ".", "it",
      "was", "ok", "!", "really")


@pytest.mark.parametrize("text", [
    'He said "no." Then: "yes, 1,000 times"! Why?',
    "Wait... what's this -- a test? (Yes.) 'Quoted.' End",
    "Don't! Can't... WON'T. gimme more'n that, I wanna go.",
])
def test_review_tokens_equal_sentence_by_sentence_tokens(text):
  # review_tokens runs the rules once over all sentences; it must match one call per sentence.
  expected = [t.lower() for s in tokenize.split_sentences(text)
              for t in tokenize.treebank_tokenize(s)]
  assert list(tokenize.review_tokens(text)) == expected
