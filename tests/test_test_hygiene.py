"""The tests share helpers through the tests.helpers package, never by editing the import path."""

import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def test_no_test_file_edits_sys_path():
  needle = "sys" + ".path"  # spelled so that this file does not name it
  offenders = [str(path.relative_to(REPO)) for path in sorted(TESTS.rglob("*.py"))
               if needle in path.read_text(encoding="utf-8")]
  assert not offenders, f"{needle} in {offenders}: import shared code from tests.helpers"


def test_pytest_puts_only_the_repository_root_on_the_path():
  options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
  assert options.get("pythonpath", []) in ([], ["."]), options["pythonpath"]


def test_every_test_folder_is_a_package():
  folders = {path.parent for path in TESTS.rglob("*.py") if "__pycache__" not in path.parts}
  missing = [str(f.relative_to(REPO)) for f in sorted(folders) if not (f / "__init__.py").is_file()]
  assert not missing, f"no __init__.py in {missing}: same-named test files would clash"
