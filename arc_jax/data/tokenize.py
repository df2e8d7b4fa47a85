"""Tokenisers: whitespace (already tokenised SST text) and a Penn-Treebank-style regex tokeniser.

The Treebank rules follow the classic Penn Treebank ``tokenizer.sed`` conventions (as in NLTK's
``TreebankWordTokenizer``): split contractions (``don't`` → ``do n't``), split most punctuation,
turn double quotes into `````` / ``''``. Like the Treebank tokeniser they expect one sentence, so
reviews are first cut into sentences at ``.``, ``!`` and ``?`` followed by white space (which is
how the stand-in word vectors were trained, docs/DATA.md, word vectors).
"""

from __future__ import annotations

import re

# PTB escapes of the SST trees and of the A3T test file, mapped to the characters GLUE writes.
PTB_ESCAPES = {
    "-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "-lcb-": "{", "-rcb-": "}",
}
_PTB_ESCAPE = re.compile(r"-(?:lrb|rrb|lsb|rsb|lcb|rcb)-|\\([/*])", re.IGNORECASE)


def normalize_ptb(text: str) -> str:
  """Un-escapes PTB tokens: ``-lrb-`` → ``(`` (any case), ``\\/`` → ``/``, ``\\*`` → ``*``."""
  return _PTB_ESCAPE.sub(lambda m: m.group(1) or PTB_ESCAPES[m.group(0).lower()], text)


def whitespace_tokens(text: str) -> tuple[str, ...]:
  """Tokens of already tokenised text (GLUE SST-2): lower-cased, PTB escapes undone, split."""
  return tuple(normalize_ptb(text.lower()).split())


# Splits off the sentence-final period (not one after another period). It starts with the literal
# period so the regex engine skips ahead quickly; the look-behind checks the character before it.
_FINAL_PERIOD = (r"\.(?<=[^.\n]\.)([\])}>\"']*)[ \t]*$", r" .\1 ")


def _rules(*pairs: tuple[str, str]) -> tuple[tuple[re.Pattern, str], ...]:
  return tuple((re.compile(pattern, re.MULTILINE), replacement) for pattern, replacement in pairs)


# The rules work on one sentence per line (``^``/``$`` anchor at sentence edges), so a whole
# review goes through each rule once instead of once per sentence.
_STARTING_QUOTES = _rules(
    (r'^"', "``"),
    (r"(``)", r" \1 "),
    (r"([ (\[{<])(\"|'{2})", r"\1 `` "),
)
_PUNCTUATION = _rules(
    (r"([:,])([^\d])", r" \1 \2"),
    (r"([:,])$", r" \1 "),
    (r"\.\.\.", " ... "),
    (r"[;@#$%&]", r" \g<0> "),
    _FINAL_PERIOD,
    (r"[?!]", r" \g<0> "),
    (r"([^'])' ", r"\1 ' "),
    (r"[\]\[(){}<>]", r" \g<0> "),
    (r"--", " -- "),
)
_ENDING_QUOTES = _rules(
    (r'"', " '' "),
    (r"(\S)('')", r"\1 \2 "),
    (r"([^' ])('[sSmMdD]|') ", r"\1 \2 "),
    (r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 "),
)
_CONTRACTIONS = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"\b(can)(not)\b", r"\b(d)('ye)\b", r"\b(gim)(me)\b", r"\b(gon)(na)\b", r"\b(got)(ta)\b",
    r"\b(lem)(me)\b", r"\b(more)('n)\b", r"\b(wan)(na)\s", r" ('t)(is)\b", r" ('t)(was)\b",
))
# Most texts hold none of these: one substring test each is much cheaper than ten regex scans.
_CONTRACTION_HINTS = ("cannot", "d'ye", "gimme", "gonna", "gotta", "lemme", "more'n", "wanna", "'t")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _treebank_lines(lines: list[str]) -> str:
  """Treebank tokens of sentences that contain no line breaks, separated by white space."""
  text = "\n".join(lines)
  for rules in (_STARTING_QUOTES, _PUNCTUATION):
    for pattern, replacement in rules:
      text = pattern.sub(replacement, text)
  text = " " + text.replace("\n", " \n ") + " "
  for pattern, replacement in _ENDING_QUOTES:
    text = pattern.sub(replacement, text)
  lowered = text.lower()
  if any(hint in lowered for hint in _CONTRACTION_HINTS):
    for pattern in _CONTRACTIONS:
      text = pattern.sub(r" \1 \2 ", text)
  return text


def treebank_tokenize(sentence: str) -> list[str]:
  """Penn-Treebank-style tokens of one sentence (case kept).

  Example: ``"They'll save $3.88, won't they?"`` →
  ``["They", "'ll", "save", "$", "3.88", ",", "wo", "n't", "they", "?"]``.
  """
  return _treebank_lines([" ".join(sentence.split())]).split()


def split_sentences(text: str) -> list[str]:
  """Cuts text after ``.``, ``!`` or ``?`` followed by white space (no abbreviation model).

  White space inside a sentence is collapsed to single spaces.
  """
  return [" ".join(s.split()) for s in _SENTENCE_END.split(text.strip()) if s]


_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def review_tokens(text: str) -> tuple[str, ...]:
  """Tokens of an IMDB review: ``<br />`` removed, sentences split, Treebank tokens, lower-cased."""
  sentences = split_sentences(_HTML_BREAK.sub(" ", text))
  return tuple(_treebank_lines(sentences).lower().split())
