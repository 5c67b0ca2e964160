"""How the code is organised: the library (`baselines/`) apart from the generators."""

from __future__ import annotations

import ast

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
