"""Builds the API reference of arc_jax from its docstrings with pdoc; any warning fails the build.

    python docs/build.py                 # HTML in docs/api/ (not committed): open docs/api/index.html
    python docs/build.py --output DIR    # elsewhere

Exit status 0 with no output when the reference built clean, else 1 with one line per warning
(``docs/build.py: warning: ...``) on stderr; the pages are written either way. A warning is

* any warning pdoc itself raises while it imports the modules and renders them (a name in an
  ``__all__`` that does not resolve, a type annotation it cannot evaluate, a module it cannot
  import, ...), and
* a cross-reference of a docstring (the reStructuredText roles ``:func:`...```, ``:class:`...```,
  ``:data:`...```, ``:meth:`...```, ``:attr:`...```, ``:mod:`...```, ``:exc:`...```,
  ``:obj:`...```, ``:const:`...```) whose target does not exist, or names a public arc_jax
  object that the reference does not link, or a role pdoc does not render (``:ref:``,
  ``:doc:``, ...). pdoc itself leaves a reference it cannot link as plain code without a word,
  so the build checks them. References to other libraries (``:func:`jax.jit```) only have to
  exist.

A target is looked up as Sphinx would: in the docstring's class and module (``:func:`put```),
by the names the module imports (``:class:`Certificate```, ``:func:`parallel.data_mesh```),
or in full, also through a package that re-exports it (``:func:`arc_jax.certify.certify_model```).
pdoc alone links only names of the page's module or full paths to where an object is
documented, so the build rewrites a target that pdoc would not link to the full name of the
object's definition (``arc_jax.certify.api.certify_model``), which the page then shows.

The docstrings are Google style (``Args:``, ``Returns:``, ``Raises:``, ``Attributes:``
sections) with reStructuredText roles and literals; pdoc's ``google`` docformat renders both.
A Sphinx ``~`` (``:class:`~arc_jax.interval.Interval```) is dropped: pdoc shows the whole name,
linked.

Every public module is documented, also those that a package's ``__all__`` leaves out (pdoc
would skip them). The build imports arc_jax (and JAX) but reads no data and starts no device
work; it takes about 10 s.
"""

from __future__ import annotations

import argparse
import builtins
import html
import importlib
import inspect
import pkgutil
import re
import sys
import typing
import warnings
from pathlib import Path

import pdoc
import pdoc.doc
import pdoc.docstrings
import pdoc.extract
import pdoc.render
import pdoc.render_helpers

PACKAGE = "arc_jax"
DOCS = Path(__file__).resolve().parent
DEFAULT_OUTPUT = DOCS / "api"
DOCFORMAT = "google"  # Google sections; pdoc applies its reStructuredText rules first

RENDERED_ROLES = ("mod", "func", "data", "const", "class", "meth", "attr", "exc", "obj", "math")
"""The reStructuredText roles pdoc renders (``pdoc.docstrings.rst``): references and math."""

ROLE = re.compile(r"(?<![\w`]):(?:py:)?([a-z]+):`([^`]+)`")

RECURSIVE_ALIASES = (("chex", "ArrayTree"), ("optax", "OptState"))
"""Type aliases of dependencies that refer to themselves by a forward reference
(``Union[..., Iterable['ArrayTree']]``): pdoc cannot evaluate an annotation that uses one, warns
and would print the expanded union; the build shows them by name instead."""


def module_names() -> list[str]:
  """Every public module of the package (no part of its name starts with ``_``), parents first."""
  package = importlib.import_module(PACKAGE)
  names = [PACKAGE] + [m.name for m in pkgutil.walk_packages(package.__path__, f"{PACKAGE}.")]
  return [n for n in names if not any(part.startswith("_") for part in n.split("."))]


def specs(names: list[str]) -> list[str]:
  """The fewest module names to hand pdoc so that it documents all of ``names`` once each: pdoc
  walks a package's submodules itself, but only those in its ``__all__`` if it has one."""
  chosen, covered = [], set()
  for name in names:
    if name not in covered:
      chosen.append(name)
      covered.update(pdoc.extract.walk_specs([name]))
  return chosen


def prepare(names: list[str]) -> None:
  """Works around what pdoc cannot read, in this process only (the code is unchanged):

  * names in an ``__all__`` that a module-level ``__getattr__`` provides lazily
    (``arc_jax.load_run``) are looked up once, so pdoc finds them in the module;
  * a ``typing.NamedTuple`` 's ``__new__`` is made to belong to the class's module, so pdoc
    evaluates its postponed annotations there (pdoc issue 765);
  * :data:`RECURSIVE_ALIASES` become named aliases.
  """
  for name in names:
    module = sys.modules[name]
    for member in getattr(module, "__all__", ()):
      if member not in vars(module) and hasattr(module, "__getattr__"):
        setattr(module, member, getattr(module, member))
    for value in list(vars(module).values()):
      if (inspect.isclass(value) and issubclass(value, tuple) and hasattr(value, "_fields")
          and value.__module__ == name):
        value.__new__.__module__ = name
  for owner, alias in RECURSIVE_ALIASES:
    module = importlib.import_module(owner)
    setattr(module, alias, typing.TypeAliasType(alias, getattr(module, alias)))


def _is_public(doc: pdoc.doc.Doc, module: pdoc.doc.Module, all_modules) -> bool:
  """pdoc's default template's ``is_public`` (module.html.jinja2), undocumented members shown."""
  if "@private" in doc.docstring:
    return False
  if "@public" in doc.docstring:
    return True
  if doc.name == "__init__":
    return bool(doc.docstring or (doc.kind == "function" and doc.signature_without_self.parameters))
  if doc.name == "__doc__" or (doc.kind == "variable" and doc.is_typevar and not doc.docstring):
    return False
  if doc.kind == "module" and doc.fullname not in all_modules:
    return False
  if (doc.qualname or doc.name) in (getattr(module.obj, "__all__", None) or []):
    return True
  return not doc.name.startswith("_")


def _members(namespace: pdoc.doc.Namespace, module, all_modules):
  """The public members a page shows, recursively (classes' members too)."""
  for member in namespace.members.values():
    if _is_public(member, module, all_modules):
      yield member
      if isinstance(member, pdoc.doc.Class):
        yield from _members(member, module, all_modules)


def _resolution(target: str, module, namespace: str = "") -> list[tuple[int, object]]:
  """How ``target`` resolves from a docstring's place (its class, its module's globals,
  builtins, or an importable module): ``(parts used, value)`` for each step, or raises
  LookupError."""
  parts = target.split(".")
  scopes = [vars(module.obj)]
  if namespace:
    owner = module.obj
    for part in namespace.split(".")[:-1]:
      owner = getattr(owner, part, None)
      if inspect.isclass(owner):
        scopes.append(vars(owner))
  scopes.append(vars(builtins))
  starts = [(1, scope[parts[0]]) for scope in reversed(scopes) if parts[0] in scope]
  for end in range(len(parts), 0, -1):
    try:
      starts.append((end, importlib.import_module(".".join(parts[:end]))))
    except ImportError:
      continue
    break
  for used, value in starts:
    steps = [(used, value)]
    try:
      for part in parts[used:]:
        value = getattr(value, part)
        steps.append((steps[-1][0] + 1, value))
    except AttributeError:
      continue
    return steps
  raise LookupError(target)


def _context(module: pdoc.doc.Module, all_modules) -> dict:
  """What pdoc's ``linkify`` reads of the template context when it renders ``module``'s page."""
  return {"module": module, "all_modules": all_modules,
          "is_public": lambda d: "true" if _is_public(d, module, all_modules) else ""}


def _links(name: str, module, all_modules, namespace: str = "") -> bool:
  """Whether pdoc links ``name`` in a docstring of ``namespace`` on ``module``'s page."""
  linked = pdoc.render_helpers.linkify(_context(module, all_modules),
                                       f"<code>{html.escape(name)}</code>",
                                       namespace=namespace, shorten=False)
  return "<a " in linked


def _defined_at(value) -> str | None:
  """The full name of the definition of a module, class or function (None for other values,
  whose definition their value does not tell)."""
  if inspect.ismodule(value):
    return value.__name__
  value = inspect.unwrap(value) if callable(value) else value
  if not (inspect.isclass(value) or inspect.isroutine(value)):
    return None
  module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
  return f"{module}.{qualname}" if module and qualname and "<" not in qualname else None


def _rewritten(name: str, module: pdoc.doc.Module, all_modules, namespace: str = "") -> str:
  """``name`` as the page of ``module`` links it: unchanged when pdoc links it as written,
  else the full name of the definition it resolves to (see the module docstring), else
  unchanged."""
  if _links(name, module, all_modules, namespace):
    return name
  try:
    steps = _resolution(name, module, namespace)
  except LookupError:
    return name
  parts = name.split(".")
  for used, value in reversed(steps):  # the longest prefix with a definition of that name
    full = _defined_at(value)
    if full and full.rpartition(".")[2] == parts[used - 1].removesuffix("()"):
      candidate = ".".join([full, *parts[used:]])
      if _links(candidate, module, all_modules):
        return candidate
  return name


def _href(name: str, module, all_modules) -> str | None:
  """Where pdoc's link for ``name`` on ``module``'s page points."""
  linked = pdoc.render_helpers.linkify(_context(module, all_modules),
                                       f"<code>{html.escape(name)}</code>", shorten=False)
  found = re.search(r'<a href="([^"]*)"', linked)
  return found[1] if found else None


def install_rewriting(all_modules: dict[str, pdoc.doc.Module]) -> None:
  """pdoc's reStructuredText conversion with each reference linked where pdoc alone would not
  (:func:`_rewritten`). It shows what the docstring wrote (a short name as such, a Sphinx
  ``~a.b.c`` as ``c``); a dotted name that pdoc does not link as written shows as the full name
  of its definition."""
  by_file = {m.source_file: m for m in all_modules.values() if m.source_file}
  rst = pdoc.docstrings.rst

  def rewrite(match, module):
    role, written = match[1], match[2].strip()
    target = written.lstrip("~")
    if role not in RENDERED_ROLES or role == "math" or module is None:
      return match[0].replace("`~", "`", 1)
    name = target.removesuffix("()")
    call = "()" if role in ("func", "meth") else ""
    new = _rewritten(name, module, all_modules)
    short = written.startswith("~") or ("." not in name and new != name)
    href = _href(new, module, all_modules) if short else None
    if href is None:
      return match[0].replace(written, new, 1)
    shown = name.rpartition(".")[2] if written.startswith("~") else name
    return f"[`{shown}{call}`]({href})"

  def converted(contents, source_file):
    module = by_file.get(source_file)
    return rst(ROLE.sub(lambda m: rewrite(m, module), contents), source_file)

  pdoc.docstrings.rst = converted


def check_references(all_modules: dict[str, pdoc.doc.Module]) -> list[str]:
  """A message for each reference in a docstring that its page would not link as it should
  (see the module docstring)."""
  problems = []
  for module in all_modules.values():
    for doc in [module, *_members(module, module, all_modules)]:
      if doc is not module and doc.taken_from[0] != module.modulename:
        continue  # shown (and checked) on the page of the module that defines it
      for match in ROLE.finditer(doc.docstring):
        role, target = match[1], match[2].strip()
        place = f"{doc.fullname}: :{role}:`{target}`"
        if role not in RENDERED_ROLES:
          problems.append(f"{place}: pdoc does not render the :{role}: role")
          continue
        if role == "math":
          continue
        name = target.lstrip("~").removesuffix("()")
        namespace = doc.qualname if doc is not module else ""
        if (_links(name, module, all_modules, namespace)
            or _links(_rewritten(name, module, all_modules), module, all_modules)):
          continue
        try:
          steps = _resolution(name, module, namespace)
        except LookupError:
          problems.append(f"{place}: no such object")
          continue
        full = _defined_at(steps[-1][1]) or name
        if full.split(".")[0] == PACKAGE and not any(p.startswith("_") for p in full.split(".")):
          problems.append(f"{place}: {full} is not in the API reference (not public?)")
  return problems


def build(output: Path) -> list[str]:
  """Renders the reference into ``output``; returns the warnings (empty: a clean build)."""
  output = Path(output)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    names = module_names()
    for name in names:
      importlib.import_module(name)
    prepare(names)
    version = getattr(importlib.import_module(PACKAGE), "__version__", "")
    pdoc.render.configure(docformat=DOCFORMAT, footer_text=f"{PACKAGE} {version}".strip())
    all_modules = {name: pdoc.doc.Module.from_name(name)
                   for name in pdoc.extract.walk_specs(specs(names))}
    install_rewriting(all_modules)
    for module in all_modules.values():
      page = output / f"{module.fullname.replace('.', '/')}.html"
      page.parent.mkdir(parents=True, exist_ok=True)
      page.write_text(pdoc.render.html_module(module, all_modules), encoding="utf-8")
    (output / "index.html").write_text(pdoc.render.html_index(all_modules), encoding="utf-8")
    (output / "search.js").write_text(pdoc.render.search_index(all_modules), encoding="utf-8")
    problems = check_references(all_modules)
    missing = sorted(set(names) - set(all_modules))
  pdoc_dir = Path(pdoc.__file__).resolve().parent
  # pdoc's warnings name a place in pdoc, or with stacklevel=2 the caller: this file.
  from_pdoc = [w for w in caught if Path(w.filename).resolve().is_relative_to(pdoc_dir)
               or Path(w.filename).resolve() == Path(__file__).resolve()]
  return ([" ".join(str(w.message).split()) for w in from_pdoc] + problems
          + [f"{name}: not documented" for name in missing])


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--output", "-o", type=Path, default=DEFAULT_OUTPUT,
                      help=f"folder of the HTML pages (default {DEFAULT_OUTPUT})")
  args = parser.parse_args(argv)
  problems = build(args.output)
  for problem in problems:
    print(f"docs/build.py: warning: {problem}", file=sys.stderr)
  if problems:
    print(f"docs/build.py: {len(problems)} warnings; the build fails on any", file=sys.stderr)
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main())
