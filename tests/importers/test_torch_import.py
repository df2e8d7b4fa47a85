"""Against PyTorch itself (slow; skipped without torch, which is optional): a tiny classifier
trained here with ``nn.Embedding`` → ``nn.Linear`` + ReLU → ``nn.LSTM`` (packed, batch_first
either way) → pooling → two ``nn.Linear``, saved with ``torch.save(model.state_dict())``, imported
by ``arc-import --from torch``: its logits equal torch's to 1e-5 and ``arc-certify``'s
certificates hold on every member of S(x)."""

import json

import numpy as np
import pytest

from arc_jax.cli import import_model as import_cli
from tests.helpers.importer_fixtures import SYNONYMS, WORDS, certify_and_enumerate, kept_logits, two_logits

torch = pytest.importorskip("torch")
nn = torch.nn
pytestmark = pytest.mark.slow

VOCAB = {w: i for i, w in enumerate(WORDS)}
STEPS, LEARNING_RATE = 40, 0.02
"""Enough to halve the loss, not so much that logits grow large (float32 rounds them coarser)."""


class TorchClassifier(nn.Module):
  """Embedding → Linear + ReLU → LSTM → final (h_n) or mean pooling → Linear → ReLU → Linear."""

  def __init__(self, bidirectional: bool, batch_first: bool, pooling: str, outputs: int):
    super().__init__()
    self.emb = nn.Embedding(len(WORDS), 4)
    self.proj = nn.Linear(4, 5)
    self.lstm = nn.LSTM(5, 3, batch_first=batch_first, bidirectional=bidirectional)
    self.fc1 = nn.Linear(6 if bidirectional else 3, 6)
    self.fc2 = nn.Linear(6, outputs)
    self.batch_first, self.pooling = batch_first, pooling

  def forward(self, ids, lengths):
    """Logits (B, K) of padded ids (B, T) with lengths (B,)."""
    x = torch.relu(self.proj(self.emb(ids)))
    if not self.batch_first:
      x = x.transpose(0, 1)
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=self.batch_first,
                                               enforce_sorted=False)
    out, (h_n, _) = self.lstm(packed)
    if self.pooling == "final":
      f = torch.cat(list(h_n), dim=-1)
    else:
      out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
      f = out.sum(1) / lengths[:, None].to(out.dtype)
    return self.fc2(torch.relu(self.fc1(f)))


def _toy(rng, n=48):
  positive, negative = ["good", "great", "fine"], ["bad", "awful"]
  neutral = ["a", "movie", "film", "the", "and", "plot"]
  sentences, labels = [], []
  for _ in range(n):
    label = int(rng.integers(2))
    words = list(rng.choice(neutral, int(rng.integers(1, 5))))
    words.insert(int(rng.integers(len(words) + 1)), rng.choice(positive if label else negative))
    sentences.append(words)
    labels.append(label)
  return sentences, np.array(labels)


def _padded(sentences):
  width = max(map(len, sentences))
  ids = [[VOCAB[w] for w in s] + [0] * (width - len(s)) for s in sentences]
  return torch.tensor(ids), torch.tensor([len(s) for s in sentences])


@pytest.mark.parametrize("bidirectional,batch_first,pooling,outputs",
                         [(True, True, "final", 2), (False, False, "mean", 1)])
def test_a_trained_torch_model_is_imported_and_certified(bidirectional, batch_first, pooling,
                                                         outputs, tmp_path, monkeypatch):
  monkeypatch.delenv("ARC_DATA_DIR", raising=False)
  monkeypatch.setenv("ARC_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.chdir(tmp_path)
  torch.manual_seed(0)
  sentences, labels = _toy(np.random.default_rng(7))
  model = TorchClassifier(bidirectional, batch_first, pooling, outputs)
  ids, lengths = _padded(sentences)
  y = torch.tensor(labels)
  optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
  losses = []
  for _ in range(STEPS):
    optimizer.zero_grad()
    logits = model(ids, lengths)
    loss = (nn.functional.cross_entropy(logits, y) if outputs == 2 else
            nn.functional.binary_cross_entropy_with_logits(logits[:, 0], y.float()))
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
  assert losses[-1] < 0.5 * losses[0]
  model.eval()
  torch.save(model.state_dict(), tmp_path / "model.pt")
  (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
  (tmp_path / "synonyms.json").write_text(json.dumps(SYNONYMS))
  dest = tmp_path / "imported" / "torch_model"
  assert import_cli.main(["--from", "torch", str(tmp_path / "model.pt"), "--vocab",
                          str(tmp_path / "vocab.txt"), "--space", "[(Del,1),(Sub,2)]",
                          "--pooling", pooling, "--synonyms", str(tmp_path / "synonyms.json"),
                          "--out", str(dest)]) == 0
  with torch.no_grad():
    expected = np.array([two_logits(row) for row in model(ids, lengths).numpy()])
  logits, _ = kept_logits(dest, sentences)
  assert np.abs(logits - expected).max() < 1e-5
  rows = certify_and_enumerate(dest, tmp_path, "[(Del,1),(Sub,2)]", sentences[:12])
  assert any(r["certified"] for r in rows)
