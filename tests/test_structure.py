"""How the code is organised: the library (`baselines/`) apart from the generators."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT


def test_the_library_never_imports_the_generators():
    """`synthetic/` writes files in the library's format; `baselines/` must not need it."""
    offenders = []
    for path in sorted((ROOT / "baselines").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            offenders += [
                f"{path.relative_to(ROOT)}: {n}"
                for n in names
                if n.split(".")[0] == "synthetic" or ".synthetic" in n
            ]
    assert not offenders, offenders
    assert not list((ROOT / "baselines").rglob("synthetic"))  # no generator left inside


# ---------------------------------------------------------------------------
# The library's import graph: every `import baselines.x` and `from baselines.x import y`,
# at module level or inside a function (an import inside a function is an edge all the same).

LIBRARY = ROOT / "baselines"
# The only module names both collections may hold: the roles every collection has.
SHARED_NAMES = {"__init__", "data", "models", "task", "layers"}


def library_modules() -> dict[str, Path]:
    """{dotted name: file} of every module of `baselines/` (a package by its __init__.py)."""
    modules = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_modules(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The library modules `path` (module `name`) imports anywhere in its body.

    `from baselines.x import y` is an edge to `baselines.x.y` when that is a module, else to
    `baselines.x`. Importing a module also runs its packages' __init__; that implicit edge is
    left out (an __init__'s own imports are edges of the package).
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package `level - 1` above this one
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*above, base] if base else above)
            found |= {
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            }
    edges = set()
    for target in found:
        while target and target not in modules:  # `import baselines.x.y` names a module
            target = target.rpartition(".")[0]
        if target and target != name:
            edges.add(target)
    return edges


def import_graph() -> dict[str, set[str]]:
    modules = library_modules()
    return {name: imported_modules(path, name, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle [a, b, ..., a], or None (depth-first search, modules in name order)."""
    state: dict[str, str] = {}  # "open" while on the path, "done" once fully searched
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_sees_every_form_of_import(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text(
        "import numpy as np\n"
        "import baselines.core.errors\n"
        "from baselines.core import metrics, tables\n"
        "from baselines.core.io_utils import atomic_write_text\n"
        "from . import task\n"
        "def hook():\n"
        "    from baselines.tiles.kernel_batches import batch_source\n"
        "    from baselines.layout import kendall_tau\n"
    )
    edges = imported_modules(source, "baselines.core.probe", library_modules())
    assert edges == {
        "baselines.core.errors",
        "baselines.core.metrics",
        "baselines.core.tables",
        "baselines.core.io_utils",
        "baselines.core.task",
        "baselines.tiles.kernel_batches",
        "baselines.layout",
    }
    graph = import_graph()
    assert "baselines.tiles.kernel_batches" in graph["baselines.tiles.task"]  # in a hook
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_library_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_core_imports_no_collection_and_no_runner():
    """`baselines/core` is what every collection shares: it is handed a collection's task,
    and the runners (`baselines/jobs`) are handed the collections' specs."""
    outside = ("baselines.tiles", "baselines.layout", "baselines.jobs")
    offenders = [
        f"{name} imports {target}"
        for name, targets in sorted(import_graph().items())
        if name == "baselines.core" or name.startswith("baselines.core.")
        for target in sorted(targets)
        if target.startswith(outside)
    ]
    assert not offenders, offenders


def module_names(package: Path) -> set[str]:
    """The names of a package's modules and subpackages, as `import` spells them."""
    return {p.stem for p in package.glob("*.py")} | {
        p.name for p in package.iterdir() if (p / "__init__.py").is_file()
    }


def test_no_module_name_is_in_both_collections_but_their_shared_roles():
    """A name in both tiles/ and layout/ says the two do the same thing: it is either one of
    the roles every collection has, or belongs in the core once."""
    both = module_names(LIBRARY / "tiles") & module_names(LIBRARY / "layout")
    assert both - SHARED_NAMES == set(), sorted(both - SHARED_NAMES)
