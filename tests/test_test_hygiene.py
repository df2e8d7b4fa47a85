"""The tests share helpers through the tests.helpers package, never by editing the import path
or by importing from another test module."""

import ast
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


def _is_test_module(name):
  return any(part.startswith("test_") for part in name.split("."))


def _test_modules_imported(path):
  """The ``test_*`` modules that ``path`` imports or imports names from, at any depth (inside
  functions too), relative imports resolved, as ``module (line N)``."""
  package = list(path.relative_to(REPO).parent.parts)
  found = []
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
    if isinstance(node, ast.Import):
      modules = [alias.name for alias in node.names if _is_test_module(alias.name)]
    elif isinstance(node, ast.ImportFrom):
      base = package[:len(package) - node.level + 1] if node.level else []
      module = ".".join(base + ([node.module] if node.module else []))
      # ``from tests.certify import test_certify`` imports a test module as a name.
      modules = [module] if _is_test_module(module) else [
          f"{module}.{alias.name}" for alias in node.names if _is_test_module(alias.name)]
    else:
      continue
    found += [f"{module} (line {node.lineno})" for module in modules]
  return found


def test_no_test_module_imports_from_another_test_module():
  offenders = {str(path.relative_to(REPO)): found for path in sorted(TESTS.rglob("*.py"))
               if (found := _test_modules_imported(path))}
  assert not offenders, f"{offenders}: move the shared names into a module of tests.helpers"
