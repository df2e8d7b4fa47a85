"""The README's "Certify your own model" section runs as written (on the tiny model it builds).

The block that loads a trained run (``arc_jax.load_run``) needs one; ``tests/test_evaluate.py``
runs it on the run it trains.
"""

from tests.helpers.readme_blocks import README, section_blocks


def test_certify_your_own_model_section_runs():
  blocks = section_blocks("Certify your own model")
  assert len(blocks) == 4
  scope = {}
  for block in blocks:
    if "load_run" in block:
      continue
    exec(compile(block, str(README), "exec"), scope)  # pylint: disable=exec-used
    if "out" in scope:
      assert scope["out"]["certified"].shape == (2,)
  assert scope["cert"].certified.shape == (32,)
