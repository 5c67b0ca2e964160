"""Finds a model by class name in a collection's models.py and builds it from its kwargs."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

from baselines.core.errors import PipelineError

# Every model's constructor starts with these; they are not kwargs.
POSITIONAL = ("self", "num_configs", "num_ops")


@dataclasses.dataclass(frozen=True)
class Upstream:
    """Upstream's kwarg names: `aliases` (upstream's -> ours), `names` (all upstream takes),
    `no_part` (canonical -> why a model without the part refuses it), `elsewhere`
    ((model, upstream name) -> why it means another part there)."""

    aliases: dict[str, str] = dataclasses.field(default_factory=dict)
    names: tuple[str, ...] = ()
    no_part: dict[str, str] = dataclasses.field(default_factory=dict)
    elsewhere: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)


def check_int(name: str, value: Any, least: int) -> None:
    """ValueError unless `value` is an int (not a bool) of at least `least`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer of at least {least}, got {value!r}")


def check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


def reductions(reduction: Any) -> tuple[str, ...]:
    """The pooling reductions of a `reduction` kwarg: TF-GNN reductions joined by "+"."""
    if not isinstance(reduction, str):
        raise ValueError(
            f"reduction must be a string such as 'sum' or 'sum+max', got {reduction!r}"
        )
    return tuple(reduction.split("+"))


def check_unique_names(path: Path) -> None:
    """PipelineError unless every top-level name of `path` is bound once."""
    try:
        tree = ast.parse(Path(path).read_text(), filename=str(path))
    except (OSError, UnicodeDecodeError) as e:
        raise PipelineError(f"{path}: cannot read the model file ({e})") from None
    except SyntaxError as e:
        raise PipelineError(f"{path}:{e.lineno}: syntax error ({e.msg}); fix the file") from None
    first: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            what = "import of"
            names = [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
            names = [n for n in names if n != "annotations"]
        elif isinstance(node, ast.ClassDef | ast.FunctionDef):
            what = "class" if isinstance(node, ast.ClassDef) else "function"
            names = [node.name]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            what = "name"
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
        else:
            continue
        for name in names:
            if name in first:
                raise PipelineError(
                    f"{path}:{node.lineno}: {what} {name} collides with the name defined at line "
                    f"{first[name]}; give your model a name of its own"
                )
            first[name] = node.lineno


def model_classes(module: ModuleType, base: type) -> dict[str, type]:
    """The public subclasses of `base` defined in `module`, in file order."""
    return {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and isinstance(obj, type)
        and issubclass(obj, base)
        and obj is not base
        and obj.__module__ == module.__name__
    }


def find_model(module: ModuleType, base: type, name: str) -> type:
    """The model class `name` of `module`; PipelineError (with a suggestion) otherwise."""
    path = Path(inspect.getsourcefile(module) or module.__name__)
    if path.is_file():
        check_unique_names(path)
    classes = model_classes(module, base)
    # Base classes from another module (tiles' model_base.py): a model of that name hides one.
    bases = vars(inspect.getmodule(base)) if base.__module__ != module.__name__ else {}
    for own, cls in classes.items():
        if own in bases:
            line = inspect.getsourcelines(cls)[1]
            raise PipelineError(
                f"{path}:{line}: class {own} collides with the base class of that name; "
                "give your model a name of its own"
            )
    if name in classes:
        return classes[name]
    obj = getattr(module, name, None)
    if isinstance(obj, type) and issubclass(obj, base):
        raise PipelineError(
            f"--model: {name} is a base class, not a model; models are the classes "
            f"defined in {path.name}: {', '.join(classes)}"
        )
    close = difflib.get_close_matches(name, list(classes), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise PipelineError(
        f"--model: unknown model '{name}'; {hint}models are the classes of {path.name}: "
        f"{', '.join(classes)}"
    )


def constructor_kwargs(cls: type, base: type) -> dict[str, Any]:
    """Every kwarg `cls` takes with its default (a subclass's wins), bases first:
    each constructor from `cls` up to `base`, as long as it passes `**kwargs` on."""
    chain = []
    for klass in cls.__mro__[: cls.__mro__.index(base) + 1]:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        named = (p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        chain.append({p.name: p.default for p in named if p.name not in POSITIONAL})
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    defaults: dict[str, Any] = {}
    for own in reversed(chain):  # a derived default replaces the base one, in place
        defaults.update(own)
    return defaults


def resolve_kwargs(
    name: str, given: dict[str, Any], accepted: tuple[str, ...], upstream: Upstream
) -> dict[str, Any]:
    """`given` with upstream's names mapped; PipelineError for a kwarg `name` does not take."""
    takes = f"{name} takes {', '.join(accepted)}"
    kwargs: dict[str, Any] = {}
    unknown = []
    for key, value in given.items():
        canonical = upstream.aliases.get(key, key)
        shown = key if key == canonical else f"{key} (= {canonical})"
        if canonical != key and canonical in given:
            raise PipelineError(
                f"--model_kwargs_json: {key} is upstream's name for {canonical}; "
                f"give one of them, not both"
            )
        if (name, key) in upstream.elsewhere:
            raise PipelineError(
                f"--model_kwargs_json: {key} means nothing for {name}: "
                f"{upstream.elsewhere[name, key]}"
            )
        if canonical not in accepted and (key in upstream.names or canonical in upstream.no_part):
            whose = "upstream's " if key in upstream.names else ""
            reason = upstream.no_part.get(canonical, "it has no part for it")
            raise PipelineError(
                f"--model_kwargs_json: {whose}{shown} means nothing for {name}: {reason}; {takes}"
            )
        if canonical not in accepted:
            unknown.append(shown)
        kwargs[canonical] = value
    if unknown:
        close = [m[0] for k in unknown if (m := difflib.get_close_matches(k, accepted, n=1))]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise PipelineError(
            f"--model_kwargs_json: {name} does not take {', '.join(sorted(unknown))}{hint}; {takes}"
        )
    return kwargs


def build_model(
    module: ModuleType,
    base: type,
    name: str,
    positional: tuple,
    given: dict[str, Any] | None,
    upstream: Upstream | None = None,
) -> Any:
    """`Class(*positional, **kwargs)` for the model `name`; bad names or values in one line."""
    cls = find_model(module, base, name)
    accepted = tuple(constructor_kwargs(cls, base))
    kwargs = resolve_kwargs(name, given or {}, accepted, upstream or Upstream())
    try:
        return cls(*positional, **kwargs)
    except (TypeError, ValueError) as e:
        raise PipelineError(f"--model_kwargs_json: bad value for {name}: {e}") from None
