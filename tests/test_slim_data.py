"""experiments/slim_data.py: the word vectors cut to the experiments' vocabularies prepare the
same data as the whole data folder."""

import gzip
import sys
from pathlib import Path

from tests.helpers.experiment_scripts import load_script
from tests.helpers.fake_data_root import write_data_root, write_gzip_lines

slim_data = load_script("slim_data")
VECTORS = "embeddings/w2v-movies.300d.txt.gz"


def test_slim_folder_drops_unused_vectors_and_prepares_the_same_data(tmp_path, monkeypatch,
                                                                    capsys):
  monkeypatch.setenv("ARC_CACHE_DIR", str(tmp_path / "cache"))
  root = write_data_root(tmp_path / "root")
  with gzip.open(root / VECTORS, "rt") as f:
    lines = f.read().splitlines()
  write_gzip_lines(root / VECTORS, lines + ["unusedword 1.0 2.0 3.0 4.0"])
  out = tmp_path / "slim"
  assert slim_data.main([str(out), "--data-root", str(root), "--max-candidates", "1", "0"]) == 0
  with gzip.open(out / VECTORS, "rt") as f:
    kept = [line.split(" ", 1)[0] for line in f]
  assert "unusedword" not in kept and 0 < len(kept) < len(lines) + 1
  assert {"good", "great", "bad", "terrible"} <= set(kept)  # tokens and their PPDB candidates
  assert sorted(p.name for p in (out / "sst2").iterdir()) == sorted(
      p.name for p in (root / "sst2").iterdir())
  assert f"wrote {out}: {len(kept)} word vectors" in capsys.readouterr().out
