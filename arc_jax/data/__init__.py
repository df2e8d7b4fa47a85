"""Real data: SST-2, SST trees and IMDB through TFDS, vocabulary, embeddings, synonyms, batches.

Entry points: :func:`prepare_lstm_data` (SST-2 / IMDB) and :func:`prepare_tree_data` (SST
trees) return everything an experiment needs; the pieces are below. Data files come from one
folder: ``$ARC_DATA_DIR``, else ``./data``, else a download folder filled on first use (see
:mod:`arc_jax.data.paths`).
"""

from arc_jax.data.batching import Batch, batch_order, iterate_batches, make_batch, num_batches
from arc_jax.data.datasets import SPLITS, Example, load_imdb, load_sst2, load_sst_trees
from arc_jax.data.embeddings import (Embeddings, OovReport, build_vocab_and_embeddings, count_oov,
                                     drop_oov, read_vectors)
from arc_jax.data.paths import DataFileError, DataFileNotFoundError, data_folder, find_data_file
from arc_jax.data.prepare import ExperimentData, TextSplit, prepare_lstm_data, prepare_tree_data
from arc_jax.data.synonyms import (candidate_words, load_stopwords, load_synonyms,
                                   restrict_synonyms)
from arc_jax.data.tokenize import normalize_ptb, review_tokens, treebank_tokenize, whitespace_tokens
from arc_jax.data.tree_batching import PaddedTrees, hu_schedule, pad_trees
from arc_jax.data.trees import Nested, Tree, TreeSyntaxError, from_nested, parse_tree, to_nested
