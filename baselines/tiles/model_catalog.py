"""The models of models.py and their kwargs, read from the source. No TensorFlow.

    catalog = read_catalog()
    catalog.names                    # ("MLP", "LateJoinSAGE", ...), in file order
    catalog.kwargs["LateJoinGAT"]    # ("hidden_dim", ..., "dim_layout")

Entry scripts refuse a misspelt model or kwarg before paying seconds for
importing TensorFlow, so they cannot import models.py to learn what it holds;
this module reads it (and model_base.py, where the bases are) with `ast`. The
rules are those `model_builder` applies to the imported classes:

- a model is a public class of models.py that derives, through classes of
  models.py and model_base.py, from `TileModel`;
- its kwargs are the `takes` tuples of it and its bases, plus the keyword
  parameters of every `__init__` below `TileModel` (not `num_configs`, `num_ops`).

A class whose ancestry leaves these two files (a base imported from
elsewhere) gets `kwargs` None: its kwargs are checked after the import. A
name defined twice in models.py, or a class that reuses an imported or base
class's name, is refused: the later definition would silently replace the
earlier one.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
from pathlib import Path

from baselines.core.errors import PipelineError

PACKAGE_DIR = Path(__file__).resolve().parent
MODELS_FILE = PACKAGE_DIR / "models.py"
BASE_FILE = PACKAGE_DIR / "model_base.py"
ROOT_CLASS = "TileModel"
# Constructor parameters every model has; not kwargs.
POSITIONAL = ("self", "num_configs", "num_ops")


@dataclasses.dataclass(frozen=True)
class ClassInfo:
    name: str
    line: int
    bases: tuple[str, ...]
    takes: tuple[str, ...]
    init_params: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ModelCatalog:
    """Model names in file order, each with its kwargs (None: known only after import)."""

    path: Path
    names: tuple[str, ...]
    kwargs: dict[str, tuple[str, ...] | None]
    # Names models.py binds by assignment: they may turn out to be models once
    # it is imported.
    uncertain: frozenset[str]

    def check_name(self, name: str) -> None:
        """PipelineError (with a "did you mean") unless `name` is, or may be, a model."""
        if name in self.names or name in self.uncertain:
            return
        raise PipelineError(unknown_model_message(name, self.names, self.path))


def unknown_model_message(name: str, names: tuple[str, ...], path: Path) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return (
        f"--model: unknown model '{name}'; {hint}models are the classes of {path.name}: "
        f"{', '.join(names)}"
    )


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _literal_strings(node: ast.expr, where: str) -> tuple[str, ...]:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        value = None
    if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
        raise PipelineError(f"{where}: `takes` must be a literal tuple of kwarg names")
    return value


def _init_params(func: ast.FunctionDef) -> tuple[str, ...]:
    args = func.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return tuple(n for n in names if n not in POSITIONAL)


def read_classes(path: Path) -> tuple[dict[str, ClassInfo], frozenset[str]]:
    """Module-level classes of one file, and the names it binds by assignment.

    Refuses a name bound twice (a class, an import, a function or an assignment).
    """
    try:
        source = path.read_text()
        tree = ast.parse(source, filename=str(path))
    except (OSError, UnicodeDecodeError) as e:
        raise PipelineError(f"{path}: cannot read the model file ({e})") from None
    except SyntaxError as e:
        raise PipelineError(f"{path}:{e.lineno}: syntax error ({e.msg}); fix the file") from None
    classes: dict[str, ClassInfo] = {}
    lines: dict[str, int] = {}
    assigned: set[str] = set()

    def bind(name: str, line: int, what: str) -> None:
        if name in lines:
            raise PipelineError(
                f"{path}:{line}: {what} {name} collides with the name defined at line "
                f"{lines[name]}; give your model a name of its own"
            )
        lines[name] = line

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bind(node.name, node.lineno, "class")
            takes: tuple[str, ...] = ()
            params: tuple[str, ...] = ()
            for item in node.body:
                targets = []
                if isinstance(item, ast.Assign):
                    targets = [t for t in item.targets if isinstance(t, ast.Name)]
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    targets = [item.target] if item.value is not None else []
                if any(t.id == "takes" for t in targets):
                    takes = _literal_strings(item.value, f"{path}:{item.lineno}")
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    params = _init_params(item)
            bases = tuple(_base_name(b) for b in node.bases)
            classes[node.name] = ClassInfo(node.name, node.lineno, bases, takes, params)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    name = (alias.asname or alias.name).split(".")[0]
                    if name != "annotations":
                        bind(name, node.lineno, "import of")
        elif isinstance(node, ast.FunctionDef):
            bind(node.name, node.lineno, "function")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    bind(target.id, node.lineno, "name")
                    assigned.add(target.id)
    return classes, frozenset(assigned)


def read_catalog(models_file: Path = MODELS_FILE, base_file: Path = BASE_FILE) -> ModelCatalog:
    """The models of `models_file` (see the module docstring for the rules)."""
    models, assigned = read_classes(models_file)
    bases, _ = read_classes(base_file)
    for name, info in models.items():
        if name in bases:
            raise PipelineError(
                f"{models_file}:{info.line}: class {name} collides with the base class of "
                f"that name in {base_file.name}; give your model a name of its own"
            )
    known = {**bases, **models}

    def lineage(name: str, seen: tuple[str, ...] = ()) -> tuple[bool, bool, list[ClassInfo]]:
        """(reaches TileModel, every ancestor is in the two files, the classes found)."""
        if name not in known or name in seen:
            return False, name in ("object", "Generic"), []
        info = known[name]
        if name == ROOT_CLASS:
            return True, True, [info]
        reaches, complete, found = False, True, [info]
        for base in info.bases:
            r, c, more = lineage(base, (*seen, name))
            reaches, complete, found = reaches or r, complete and c, found + more
        return reaches, complete, found

    names: list[str] = []
    kwargs: dict[str, tuple[str, ...] | None] = {}
    for name in models:
        if name.startswith("_"):
            continue
        reaches, complete, ancestors = lineage(name)
        if not reaches:
            continue  # a helper class, not a TileModel
        names.append(name)
        if not complete:
            kwargs[name] = None  # a base from elsewhere may add kwargs
            continue
        collected: list[str] = []
        # Bases first, so the standard parts lead and a class's own kwargs follow.
        for a in reversed(_unique(ancestors)):
            own = a.takes + (a.init_params if a.name != ROOT_CLASS else ())
            collected += [k for k in own if k not in collected]
        kwargs[name] = tuple(collected)
    # A name models.py assigns may still turn out to be a model once imported
    # (a class made by a function); its classes are known for certain, and an
    # imported class is never a model (a model is defined in models.py).
    return ModelCatalog(models_file, tuple(names), kwargs, assigned)


def _unique(infos: list[ClassInfo]) -> list[ClassInfo]:
    seen: set[str] = set()
    out = []
    for info in infos:
        if info.name not in seen:
            seen.add(info.name)
            out.append(info)
    return out
