"""Configs: the paper's rows, validation, run names and the space guard (arc_jax.train.config)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers.experiment_scripts import load_script

from arc_jax.perturbation import parse_space
from arc_jax.perturbation.shapes import MAX_DP_SHAPES
from arc_jax.train import ConfigError, default_config, validate
from arc_jax.train.config import LEGACY_FIELDS, merge, migrate, run_name, with_defaults
from arc_jax.train.run import warn_if_maps_run_short


def load_config_module(name):
  return load_script(f"configs/{name}")


PAPER_ROWS = {
    "arc": ["lstm,del2sub2", "lstm,sub2ins2", "lstm,del2ins2", "lstm,review", "bilstm,del2sub2",
            "bilstm,sub2ins2", "bilstm,del2ins2"],
    "augment": ["lstm,del2sub2", "lstm,sub2ins2", "lstm,del2ins2", "lstm,review",
                "bilstm,del2sub2", "bilstm,sub2ins2", "bilstm,del2ins2"],
    "hotflip": ["lstm,del2sub2", "lstm,sub2ins2", "lstm,del2ins2", "lstm,review",
                "bilstm,del2sub2", "bilstm,sub2ins2", "bilstm,del2ins2"],
    "normal": ["lstm", "bilstm"],
    "imdb": ["sub1", "sub2"],
    "tree": ["normal", "arc,del2sub2", "arc,sub2ins2", "arc,del2ins2", "augment,del2sub2",
             "augment,sub2ins2", "augment,del2ins2", "hotflip,del2sub2", "hotflip,sub2ins2",
             "hotflip,del2ins2"],
}


def test_every_paper_row_has_a_valid_config_with_its_lambda():
  names = set()
  for family, rows in PAPER_ROWS.items():
    module = load_config_module(family)
    for row in rows:
      config = module.get_config(row)
      validate(config)
      assert set(config.keys()) == set(default_config().keys())
      names.add(config.name)
  assert len(names) == sum(map(len, PAPER_ROWS.values()))
  arc = load_config_module("arc")
  assert arc.get_config().to_dict() == default_config().to_dict()
  assert [arc.get_config(r).lambda_max for r in PAPER_ROWS["arc"]] == [0.5, 0.6, 0.9, 0.8, 0.5,
                                                                       0.9, 0.7]
  imdb = load_config_module("imdb").get_config("sub2")
  assert (imdb.lstm.pooling, imdb.num_epochs, imdb.ramp_epochs, imdb.lambda_max) == (
      "mean", 30, 20, 0.8)
  normal = load_config_module("normal").get_config()
  assert (normal.method, normal.early_stopping, normal.num_epochs) == ("normal", 5, 24)
  for family in ("augment", "hotflip"):
    module = load_config_module(family)
    configs = [module.get_config(r) for r in PAPER_ROWS[family]]
    assert {(c.method, c.early_stopping, c.lambda_max) for c in configs} == {(family, 5, 0.0)}
  for family in ("arc", "augment", "hotflip"):
    module = load_config_module(family)
    assert [module.get_config(r).max_candidates for r in ("lstm,review", "lstm,del2sub2")] == [0, 1]
    assert module.get_config("bilstm,sub2ins2").lstm.bidirectional


def test_tree_rows_follow_the_original_tree_script():
  tree = load_config_module("tree")
  configs = {row: tree.get_config(row) for row in PAPER_ROWS["tree"]}
  for c in configs.values():
    assert (c.model, c.dataset, c.optimizer, c.batch_size, c.learning_rate, c.weight_decay,
            c.grad_clip, c.hidden, c.dropout_rate, c.synonyms, c.max_candidates,
            c.tree_lstm.trainable_embeddings, c.tree_lstm.embedding_lr_scale) == (
                "tree_lstm", "sst_trees", "adagrad", 20, 0.05, 1e-4, 0.25, 150, 0.5, "ppdb", 1,
                True, 0.1)
  arc = [configs[f"arc,{s}"] for s in ("del2sub2", "sub2ins2", "del2ins2")]
  assert [(c.lambda_max, c.num_epochs, c.ramp_epochs) for c in arc] == [
      (0.07, 30, 20), (0.06, 30, 20), (0.07, 30, 20)]
  assert [c.space for c in arc] == ["[(Del,2),(Sub,2)]", "[(Sub,2),(Ins,2)]", "[(Del,2),(Ins,2)]"]
  normal, augment = configs["normal"], configs["augment,sub2ins2"]
  assert (normal.name, normal.method, normal.num_epochs, normal.early_stopping) == (
      "normal_tree", "normal", 50, 10)
  assert (augment.name, augment.num_epochs, augment.early_stopping, augment.lambda_max) == (
      "augment_tree_sub2ins2", 30, 5, 0.0)
  assert tree.get_config().name == "arc_tree_del2sub2"
  hotflip = configs["hotflip,del2ins2"]
  assert (hotflip.name, hotflip.method, hotflip.num_epochs, hotflip.early_stopping,
          hotflip.lambda_max, hotflip.space) == (
              "hotflip_tree_del2ins2", "hotflip", 30, 5, 0.0, "[(Del,2),(Ins,2)]")
  with pytest.raises(ValueError, match="No Tree-LSTM row 'hotflip'.*hotflip,del2ins2"):
    tree.get_config("hotflip")


@pytest.mark.parametrize("changes, message", [
    (dict(dataset="sst_trees"), "not a dataset of model 'lstm'.*config.model='tree_lstm'"),
    (dict(model="tree_lstm"), "not a dataset of model 'tree_lstm'"),
    (dict(model="tree_lstm", dataset="sst_trees", robust_loss="max_of_means"), "'worst_case'"),
    (dict(model="gru"), "'lstm', 'tree_lstm'"),
    (dict(optimizer="sgd"), "'adagrad', 'adam'"),
    (dict(lstm=dict(pooling="max")), r"config.lstm.pooling='max' is unknown; choose one of "
     r"\['final', 'mean', 'attention'\]"),
    (dict(trainable_embeddings=True), r"config.trainable_embeddings is now "
     r"config.tree_lstm.trainable_embeddings: set that field instead"),
    (dict(space="[(Dell,2)]"), r"config.space='\[\(Dell,2\)\]': Unknown transformation 'Dell'. "
     "Valid names: Del, Ins"),
    (dict(space="[(Del,2)"), r"config.space=.*: .*position"),
    (dict(model="tree_lstm", dataset="sst_trees", space="[(Trans1,1)]"),
     "Trans1 .* has no tree counterpart"),
    (dict(space="[]"), r"^config\.space='\[\]' has no transformation; list at least one"),
    (dict(space="[(Del,2),(Sub,0)]"), r"^config\.space=.*: Sub has budget 0 and never applies; "
     r"give it a budget >= 1 or leave it out\.$"),
])
def test_model_dataset_method_and_optimizer_must_fit_together(changes, message):
  config = merge(default_config(), changes)
  with pytest.raises(ConfigError, match=message):
    validate(config)


@pytest.mark.parametrize("field, value, allowed", [
    ("dropout_rate", 1.0, r"in \[0, 1\)"), ("learning_rate", 0.0, "> 0"),
    ("grad_clip", -0.25, "> 0"), ("weight_decay", -1e-4, ">= 0"),
    ("tree_lstm.embedding_lr_scale", -0.1, ">= 0"), ("eps_max", 1.5, r"in \[0, 1\]"),
    ("eps_start", float("nan"), r"in \[0, 1\]"), ("min_vocab_coverage", -0.1, r"in \[0, 1\]"),
    ("max_empty_share", 2.0, r"in \[0, 1\]"), ("min_transformation_share", 1.5, r"in \[0, 1\]"),
    ("hidden", 0, ">= 1"), ("lstm.projection", 0, ">= 1"), ("lstm.head_hidden", -1, ">= 1"),
    ("num_train", 0, ">= 1"), ("num_test", -5, ">= 1"), ("max_steps", 0, ">= 1"),
])
def test_numeric_fields_outside_their_range_are_refused(field, value, allowed):
  config = default_config()
  config.update(dict(dropout_rate=0.0, eps_max=1.0, min_vocab_coverage=0.0, max_empty_share=1.0,
                     weight_decay=0.0, num_train=1))  # the edges of the ranges pass
  block, _, name = field.rpartition(".")
  if block == "tree_lstm":  # a family's block is checked when the family is chosen
    config.model, config.dataset = "tree_lstm", "sst_trees"
  validate(config)
  (config[block] if block else config)[name] = value
  with pytest.raises(ConfigError, match=rf"^config\.{field}={value} must be {allowed}\.$"):
    validate(config)


def test_unknown_rows_and_settings_name_the_choices():
  with pytest.raises(ValueError, match="lstm,del2sub2"):
    load_config_module("arc").get_config("bilstm,review")
  with pytest.raises(ValueError, match="No hotflip row 'lstm,sub3'.*bilstm,del2ins2"):
    load_config_module("hotflip").get_config("lstm,sub3")
  config = default_config()
  config.method = "fgsm"
  with pytest.raises(ValueError, match="'arc'.*'hotflip'"):
    validate(config)


def test_train_script_reports_a_bad_setting_with_status_2_and_writes_nothing(tmp_path):
  run = tmp_path / "run"
  done = subprocess.run([sys.executable, str(Path(__file__).parents[2] / "experiments" / "train.py"),
                         "--config.optimizer=sgd", f"--workdir={run}"],
                        capture_output=True, text=True, timeout=600, check=False)
  assert done.returncode == 2, done.stderr[-2000:]
  assert "error: config.optimizer='sgd' is unknown; choose one of ['adagrad', 'adam']" in done.stderr
  assert "Traceback" not in done.stderr and not run.exists()


def test_run_names_follow_the_overridden_fields():
  arc = load_config_module("arc").get_config()
  assert run_name(arc, {}) == run_name(arc, {"progress", "data_dir"}) == "arc_lstm_del2sub2"
  arc.space = "[(Ins,2),(Sub,2)]"  # a paper space in another order keeps its key
  assert run_name(arc, {"space"}) == "arc_lstm_sub2ins2"
  arc.space, arc.seed = "[(Del,50),(Sub,50)]", 1
  assert run_name(arc, {"space", "seed", "max_steps"}) == "arc_lstm_del50sub50_seed1"
  normal = load_config_module("normal").get_config()
  assert run_name(normal, {}) == "normal_lstm"
  normal.lstm.bidirectional = True
  assert run_name(normal, {"lstm.bidirectional"}) == "normal_bilstm_del2sub2"
  tree = load_config_module("tree").get_config("augment,sub2ins2")
  assert run_name(tree, {"method"}) == "augment_tree_sub2ins2"
  tree.name = "mine"
  assert run_name(tree, {"name", "seed"}) == "mine"
  # Many overrides: a hash of them instead of a long name.
  assert re.fullmatch(r"augment_tree_sub2ins2_[0-9a-f]{8}",
                      run_name(tree, set(tree.keys()) - {"name"}))


def test_spaces_too_large_for_the_machine_are_refused_with_the_estimate():
  config = default_config()
  space = parse_space("[(Del,2),(Sub,2)]", synonyms={})
  assert space.grid_size() == 9
  # (1 + m) branches × (lo, hi) × (h, c) × B × C × H float32 values per position.
  assert space.signature.dp_memory_estimate(32, 100, 64) == 3 * 2 * 2 * 32 * 9 * 100 * 4 * 64
  config.space = "[(Del,50),(Sub,50)]"
  with pytest.raises(ConfigError, match=r"2,601 budget slots per position; its DP states alone "
                     r"need about 23\.8 GiB per batch of 32 .*allow_large_space=True"):
    validate(config)
  config.allow_large_space = True
  validate(config)


def test_dp_shapes_bound_defaults_to_what_older_runs_did():
  """New configs bound the DP shapes; a config.json written before the field existed reads as
  0 (every batch on its exact grid, as those runs trained); a negative bound is refused."""
  assert default_config().max_dp_shapes == MAX_DP_SHAPES > 0
  saved = default_config().to_dict()
  del saved["max_dp_shapes"]
  assert with_defaults(saved).max_dp_shapes == 0
  assert with_defaults(default_config().to_dict()).max_dp_shapes == MAX_DP_SHAPES
  config = default_config()
  config.max_dp_shapes = -1
  with pytest.raises(ConfigError, match="max_dp_shapes=-1 must be >= 0"):
    validate(config)


def test_a_process_short_of_memory_maps_is_warned(tmp_path, caplog):
  """Past half of vm.max_map_count, training warns with both fixes; below it, or without the
  files (not Linux), it stays silent."""
  maps, limit = tmp_path / "maps", tmp_path / "max_map_count"
  maps.write_text("mapping\n" * 600)
  limit.write_text("1000\n")
  with caplog.at_level("WARNING"):
    assert warn_if_maps_run_short(str(maps), str(limit))
  assert "600 of the 1000 memory maps" in caplog.text and "config.max_dp_shapes" in caplog.text
  assert "sysctl -w vm.max_map_count=262144" in caplog.text
  limit.write_text("1200\n")
  assert not warn_if_maps_run_short(str(maps), str(limit))
  assert not warn_if_maps_run_short(str(tmp_path / "absent"), str(limit))


REPO = Path(__file__).resolve().parents[2]


def test_every_committed_flat_config_migrates_into_the_blocks_and_validates():
  """Each committed run's config.json (written flat, before the settings blocks) reads with its
  flat fields in their blocks, validates, and means what the same config in today's layout
  means."""
  files = sorted((REPO / "results").glob("*/config.json"))
  assert len(files) >= 30
  moved = 0
  for path in files:
    saved = json.loads(path.read_text())
    config = with_defaults(saved)
    validate(config, training=False)
    for field, block in LEGACY_FIELDS.items():
      if field in saved:
        assert config[block][field] == saved[field], (path, field)
        moved += 1
    assert not set(config) & set(LEGACY_FIELDS), path
    assert with_defaults(config.to_dict()).to_dict() == config.to_dict(), path
  assert moved > 5 * len(files)


def test_migrate_moves_only_the_old_flat_fields():
  flat = {"method": "arc", "pooling": "mean", "abstracted": "Del", "embedding_lr_scale": 0.5}
  assert migrate(flat) == {"method": "arc", "lstm": {"pooling": "mean"},
                           "augmented": {"abstracted": "Del"},
                           "tree_lstm": {"embedding_lr_scale": 0.5}}
  nested = default_config().to_dict()
  assert migrate(nested) == nested
