"""The import graph of ``arc_jax``: no cycle between modules, none between packages, and every
import goes to the importer's layer or a lower one (:data:`LAYERS`).

The graph is read from the source (the AST), not from ``sys.modules``, so that it also sees imports
inside functions, which run later but still close a circle; a package's lazy re-exports
(``lazy_exports(__name__, {module: names})``, :mod:`arc_jax._lazy`) count as imports of those names
from those modules. Imports under ``if TYPE_CHECKING:`` count too: they never run, but a type
named from a higher module or round a circle is a dependency all the same (a type checker, a reader
and a refactoring follow it). Left out: a module's edges to its own ancestor packages (Python runs
them first anyway), and a package ``__init__``'s edges to its own submodules (re-exports). A name that
a package re-exports (``from arc_jax.data import Tree``) resolves to the module that defines it,
and a name the ``__init__`` defines itself (``FAMILIES``) depends on everything that ``__init__``
imports, so re-exports hide no dependency.
"""

import ast
import pathlib

import arc_jax

PACKAGE_ROOT = pathlib.Path(arc_jax.__file__).parent

LAYERS = (
    {"padding", "parallel", "_lazy", "_callable", "stats", "per_example", "settings",
     "xla_options"},  # shape buckets, padding, devices; lazy packages; rates' intervals and
    # tests, per-example tables, extensions' settings blocks (pure Python); compiler options
    {"interval", "linear_step", "domain", "domains", "data"},  # domains, their protocol, their
    # registry by name; data
    {"perturbation"},  # spaces over strings and trees, and their plans
    {"nn"},  # the models, concrete and abstract
    {"certify", "attacks"},  # certification DPs; enumeration, HotFlip, sampling
    {"verify"},  # complete verification by branch and bound
    {"train"},  # methods, model families, objectives, the loop, checkpoints
    {"metrics", "evaluation", "configs", "importers"},  # metrics by name; evaluating runs;
    # shipped configs; outside models as kept models
    {"cli"},
)
"""The layers of ``arc_jax``, bottom first: each module or subpackage imports only from its own
layer or the ones below."""

Graph = dict[str, set[str]]


def module_files(root: pathlib.Path = PACKAGE_ROOT) -> dict[str, pathlib.Path]:
  """Dotted module name → source file, for every ``.py`` under ``root``."""
  files = {}
  for path in sorted(root.rglob("*.py")):
    parts = path.relative_to(root.parent).with_suffix("").parts
    if parts[-1] == "__init__":
      parts = parts[:-1]
    files[".".join(parts)] = path
  return files


def _imports(tree: ast.AST):
  """Every Import / ImportFrom node of ``tree``: top level, inside functions and classes, and
  under ``if TYPE_CHECKING:``."""
  for node in ast.walk(tree):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
      yield node


def _lazy_exports(tree: ast.AST):
  """(module, names) of each entry of the mappings given to ``lazy_exports`` calls in ``tree``."""
  for node in ast.walk(tree):
    if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_exports"
        and len(node.args) == 2 and isinstance(node.args[1], ast.Dict)):
      for key, value in zip(node.args[1].keys, node.args[1].values):
        yield key.value, [name.value for name in value.elts]


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
  """The absolute module an ImportFrom names (relative imports resolved against ``module``)."""
  if not node.level:
    return node.module or ""
  base = module.split(".")
  base = base[:len(base) - node.level + (1 if is_package else 0)]
  return ".".join(base + ([node.module] if node.module else []))


def _raw_imports(module: str, path: pathlib.Path, modules: set[str]) -> list[tuple[str, str | None]]:
  """(imported module, imported name or None) pairs of ``module``, restricted to ``modules``."""
  is_package = path.name == "__init__.py"
  tree = ast.parse(path.read_text(), str(path))
  pairs = [(source, name) for source, names in _lazy_exports(tree) if source in modules
           for name in names]
  for node in _imports(tree):
    if isinstance(node, ast.Import):
      pairs.extend((alias.name, None) for alias in node.names if alias.name in modules)
      continue
    source = _absolute(node, module, is_package)
    if source not in modules:
      continue
    for alias in node.names:
      submodule = f"{source}.{alias.name}"
      pairs.append((submodule, None) if submodule in modules else (source, alias.name))
  return pairs


def import_graph(root: pathlib.Path = PACKAGE_ROOT) -> Graph:
  """Module → the modules of the package it imports, with the exclusions of the module docstring."""
  files = module_files(root)
  modules = set(files)
  raw = {module: _raw_imports(module, path, modules) for module, path in files.items()}

  def defining_module(package: str, name: str, seen: frozenset = frozenset()) -> str:
    """Where ``package`` got ``name`` from: the re-exported module, or ``package`` itself."""
    for source, imported in raw[package]:
      if imported == name and source != package and (source, name) not in seen:
        if source in files and files[source].name == "__init__.py":
          return defining_module(source, name, seen | {(source, name)})
        return source
    return package

  def targets(source: str, name: str | None) -> set[str]:
    """The modules that ``from source import name`` (``import source`` for None) runs."""
    if name is None or files[source].name != "__init__.py":
      return {source}
    defining = defining_module(source, name)
    if defining != source:
      return {defining}
    # A name the package defines itself (a registry): it is built from what its __init__ imports.
    return {source} | {defining_module(s, n) if n is not None and files[s].name == "__init__.py"
                       else s for s, n in raw[source]}

  graph: Graph = {}
  for module, pairs in raw.items():
    is_package = files[module].name == "__init__.py"
    edges = set()
    for source, name in pairs:
      if source == module or module.startswith(source + "."):
        continue  # itself or an ancestor package: loaded before ``module`` anyway
      for target in targets(source, name):
        if target == module or module.startswith(target + "."):
          continue
        if is_package and target.startswith(module + "."):
          continue  # a package re-exporting its own submodules
        edges.add(target)
    graph[module] = edges
  return graph


def package_graphs(graph: Graph) -> dict[str, Graph]:
  """For each package, the graph of its direct children (modules and subpackages), an edge where
  any module inside one imports any module inside another: the layers within the package."""
  packages = {module.rsplit(".", 1)[0] for module in graph if "." in module}
  layers: dict[str, Graph] = {package: {} for package in packages}

  def child(package: str, module: str) -> str:
    """The direct child of ``package`` that holds ``module``."""
    return f"{package}.{module[len(package) + 1:].split('.')[0]}"

  for package in packages:
    for module, targets in graph.items():
      if not module.startswith(package + "."):
        continue
      edges = layers[package].setdefault(child(package, module), set())
      edges.update(child(package, target) for target in targets
                   if target.startswith(package + ".")
                   and child(package, target) != child(package, module))
  return layers


def find_cycles(graph: Graph) -> list[list[str]]:
  """One cycle (``[a, b, …, a]``) per strongly connected component with more than one node or a
  self-edge, found by Tarjan's algorithm; empty when the graph is acyclic."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  on_stack: set[str] = set()
  stack: list[str] = []
  components: list[list[str]] = []

  def connect(node: str) -> None:
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for succ in sorted(graph.get(node, ())):
      if succ not in index:
        connect(succ)
        low[node] = min(low[node], low[succ])
      elif succ in on_stack:
        low[node] = min(low[node], index[succ])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      components.append(component)

  for node in sorted(graph):
    if node not in index:
      connect(node)

  cycles = []
  for component in components:
    members = set(component)
    start = min(component)
    if len(component) == 1 and start not in graph.get(start, ()):
      continue
    cycles.append(_path_back(graph, start, members))
  return sorted(cycles)


def _path_back(graph: Graph, start: str, members: set[str]) -> list[str]:
  """A shortest cycle through ``start`` inside its strongly connected component (breadth first)."""
  parents: dict[str, str] = {}
  frontier = [start]
  while frontier:
    following = []
    for node in frontier:
      for succ in sorted(graph.get(node, ())):
        if succ == start:
          path = [node]
          while path[-1] != start:
            path.append(parents[path[-1]])
          return path[::-1] + [start]
        if succ in members and succ not in parents:
          parents[succ] = node
          following.append(succ)
    frontier = following
  raise AssertionError(f"{start} is in a strongly connected component but on no cycle")


def test_find_cycles_reports_a_hand_made_cycle():
  graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
  assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
  assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_import_graph_sees_relative_from_function_level_and_type_checking_imports(tmp_path):
  package = tmp_path / "pkg"
  (package / "sub").mkdir(parents=True)
  (package / "__init__.py").write_text("from pkg.sub import leaf\n")
  (package / "sub" / "__init__.py").write_text("from .leaf import Leaf\nREGISTRY = [Leaf]\n")
  (package / "sub" / "leaf.py").write_text(
      "from typing import TYPE_CHECKING\nimport pkg\nif TYPE_CHECKING:\n  from pkg import top\n"
      "class Leaf:\n  pass\n")
  (package / "top.py").write_text("from pkg.sub import Leaf\ndef f():\n  from . import other\n")
  (package / "other.py").write_text("from .sub import leaf\nimport pkg.top\n")
  (package / "user.py").write_text("from pkg.sub import REGISTRY\nfrom pkg.lazy import Leaf\n")
  (package / "lazy").mkdir()
  (package / "lazy" / "__init__.py").write_text(
      "from pkg.tools import lazy_exports\n"
      "__getattr__, __dir__, __all__ = lazy_exports(__name__, {'pkg.sub': ('Leaf',)})\n")
  (package / "tools.py").write_text("def lazy_exports(package, modules):\n  pass\n")
  graph = import_graph(package)
  assert graph == {
      "pkg": set(),
      "pkg.sub": set(),
      "pkg.sub.leaf": {"pkg.top"},  # under ``if TYPE_CHECKING:``
      "pkg.top": {"pkg.sub.leaf", "pkg.other"},
      "pkg.other": {"pkg.sub.leaf", "pkg.top"},
      "pkg.user": {"pkg.sub", "pkg.sub.leaf"},
      "pkg.lazy": {"pkg.tools", "pkg.sub.leaf"},
      "pkg.tools": set(),
  }
  assert find_cycles(graph) == [["pkg.other", "pkg.top", "pkg.other"]]


def test_a_type_checking_import_alone_closes_a_cycle(tmp_path):
  package = tmp_path / "pkg"
  package.mkdir()
  (package / "__init__.py").write_text("")
  (package / "low.py").write_text(
      "import typing\nif typing.TYPE_CHECKING:\n  from pkg.high import High\n")
  (package / "high.py").write_text("from pkg import low\nclass High:\n  pass\n")
  assert find_cycles(import_graph(package)) == [["pkg.high", "pkg.low", "pkg.high"]]


def test_package_graphs_see_layers_that_import_each_other():
  graph = {"p": set(), "p.a": set(), "p.a.x": {"p.b.y"}, "p.b": set(), "p.b.y": set(),
           "p.b.z": {"p.a.w"}, "p.a.w": set()}
  layers = package_graphs(graph)
  assert find_cycles(graph) == []
  assert find_cycles(layers["p"]) == [["p.a", "p.b", "p.a"]]
  assert find_cycles(layers["p.a"]) == [] and find_cycles(layers["p.b"]) == []


def test_arc_jax_imports_only_downwards():
  rank = {f"arc_jax.{name}": i for i, layer in enumerate(LAYERS) for name in layer}
  top = package_graphs(import_graph())["arc_jax"]
  unplaced = sorted(set(top) - set(rank))
  assert not unplaced, (f"{unplaced} belong to no layer: add each to LAYERS in "
                        "tests/test_architecture.py.")
  upwards = sorted(f"{a} -> {b}" for a, targets in top.items() for b in targets if rank[b] > rank[a])
  assert not upwards, f"imports from a higher layer: {upwards}"


def _report(cycles: list[list[str]]) -> str:
  for cycle in cycles:
    print(" -> ".join(cycle))
  return f"{len(cycles)} import cycle(s): " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_arc_jax_modules_import_no_cycle():
  cycles = find_cycles(import_graph())
  assert not cycles, _report(cycles)


def test_arc_jax_packages_import_no_cycle():
  """A cycle between subpackages (``data`` ↔ ``perturbation``) is a cycle between layers even when
  no single module closes it."""
  cycles = [cycle for layer in package_graphs(import_graph()).values() for cycle in find_cycles(layer)]
  assert not cycles, _report(sorted(cycles))
