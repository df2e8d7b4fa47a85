"""A run stashed with ``reproduce.py --stash`` (experiments/runs.py) on one machine and resumed
from the stash on another finishes as the uninterrupted run, bit for bit; the stash holds its
newest checkpoint only, and no frozen word vectors (they are rebuilt from the data)."""

import json
import shutil
import tarfile

import numpy as np
import orbax.checkpoint as ocp
import pytest
from tests.helpers.experiment_scripts import load_script
from tests.helpers.fake_data_root import write_data_root

from arc_jax.train import default_config, train_and_evaluate

reproduce = load_script("reproduce")
RUN = "stash_test"


def tiny_config():
  """A tiny LSTM with frozen vectors and dropout: 3 steps an epoch on the fake SST-2, a
  checkpoint after every step."""
  c = default_config()
  c.name, c.method, c.space = RUN, "normal", "[(Del,1),(Sub,1)]"
  c.hidden, c.lstm.projection, c.lstm.head_hidden = 6, 5, 4
  c.batch_size = c.eval_batch_size = 2
  c.num_epochs = 2
  c.checkpoint_every = 1
  c.progress = False
  return c


def newest_state(run_dir):
  """(step, the raw restored train state and totals) of the run's newest checkpoint."""
  step = reproduce.runs.newest_checkpoint(run_dir)
  return int(step.name), ocp.tree.to_flat_dict(ocp.PyTreeCheckpointer().restore(step / "state"))


def without_timings(summary):
  return {k: without_timings(v) if isinstance(v, dict) else v for k, v in summary.items()
          if "seconds" not in k}


@pytest.mark.filterwarnings("ignore:Sharding info not provided")  # raw restores in newest_state
def test_a_stashed_run_resumes_elsewhere_to_the_uninterrupted_result(tmp_path, monkeypatch,
                                                                   caplog):
  monkeypatch.setenv("ARC_DATA_DIR", str(write_data_root(tmp_path / "data")))
  monkeypatch.setenv("ARC_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.setattr(reproduce.runs, "ROOT", tmp_path)
  monkeypatch.setattr(reproduce.runs, "RESULTS", tmp_path / "results")
  monkeypatch.setattr(reproduce.runs, "UNFINISHED", tmp_path / "results" / "unfinished")
  reference = train_and_evaluate(tiny_config(), tmp_path / "reference" / RUN)
  assert reference["status"] == "completed" and reference["steps"] == 6

  first, second = tmp_path / "machine_a", tmp_path / "machine_b"
  stopping = tiny_config()
  stopping.max_steps = 4  # mid-epoch 1, after the best checkpoint of epoch 0
  assert train_and_evaluate(stopping, first / RUN)["status"] == "stopped"
  assert sorted(p.name for p in (first / RUN / "checkpoints").iterdir()) == ["3", "4"]
  run = reproduce.Run(RUN, "normal.py")
  cell = reproduce.Cell("Table 2", "LSTM Normal", "[(Del,1),(Sub,1)]",
                        (reproduce.Evaluation(run, "[(Del,1),(Sub,1)]", ("acc",)),), {})
  assert reproduce.stash_unfinished([cell], first)[0].startswith(f"stashed {first / RUN}")
  stash = tmp_path / "results" / "unfinished" / f"{RUN}.tar.gz"
  with tarfile.open(stash) as tar:
    names = tar.getnames()
    metadata = json.load(tar.extractfile(f"{RUN}/checkpoints/4/state/_METADATA"))
  assert {n.split("/")[2] for n in names if n.startswith(f"{RUN}/checkpoints/")} == {"4"}
  assert any(n.startswith(f"{RUN}/best/3/params") for n in names)
  assert not [key for key in metadata["tree_metadata"] if "embeddings" in key]
  shutil.rmtree(first)

  def command(args, log, limits=None):  # train.py resumes in this process; the export is skipped
    if args[1] == "experiments/train.py":
      return int(train_and_evaluate(tiny_config(), second / RUN)["status"] != "completed")
    return 0
  monkeypatch.setattr(reproduce.runs, "_run_command", command)
  with caplog.at_level("INFO", logger="arc_jax.train.run"):
    done = reproduce.process_run(run, [], second, tmp_path / "log", True)
  assert done[:2] == [f"unpacked results/unfinished/{RUN}.tar.gz", f"trained {RUN}"]
  assert f"Resuming the unfinished run in {second / RUN} from step 4 " in caplog.text

  summaries = [json.loads((d / RUN / "summary.json").read_text())
               for d in (tmp_path / "reference", second)]
  assert without_timings(summaries[0]) == without_timings(summaries[1])
  (step_a, state_a), (step_b, state_b) = (newest_state(d / RUN)
                                          for d in (tmp_path / "reference", second))
  assert step_a == step_b == 6 and state_a.keys() == state_b.keys()
  for key in state_a:
    np.testing.assert_array_equal(state_a[key], state_b[key], err_msg=str(key))
