"""What an evaluation of a kept model writes in results/: the results a user asked for (results
file, per-example table) and the progress files that resume a stopped search stay visible to git;
the temporary files a kill can leave behind are ignored (issue 45)."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

WANTED = ("results/normal_lstm/eval/test_first20_Del1Sub1_acc.json",
          "results/normal_lstm/eval/test_first20_Del1Sub1_acc.examples.tsv.gz",
          "results/normal_lstm/eval/test_Ins3Sub3_acc_cf_exact.progress.jsonl",
          "results/normal_lstm/eval/test_Ins3Sub3_acc_cf_exact.exact.progress.jsonl",
          "results/store/vectors-4385942a4aacf16c.npz")
TEMPORARY = ("results/normal_lstm/eval/test_Ins3Sub3_acc_cf_exact.exact.progress.jsonl.tmp",
             "results/normal_tree/eval/test_Sub2Ins2_acc_cf_ex.progress.jsonl.tmp",
             "results/store/.vectors-4385942a4aacf16c.npz.12345")


def _ignored(path: str) -> bool:
  return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT).returncode == 0


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout")
@pytest.mark.parametrize("path", WANTED + TEMPORARY)
def test_results_stay_visible_and_temporary_files_are_ignored(path):
  assert _ignored(path) == (path in TEMPORARY), path
