"""Flagfiles, absl's convention: one `--flag=value` per line, `#` and `//` comments, and
`--flagfile=OTHER` (relative to the including file); expanded in place, the last flag wins."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from baselines.core.errors import PipelineError
from baselines.core.io_utils import read_user_text

MAX_DEPTH = 8


def read_flagfile(path: Path | str, known_flags: Collection[str], depth: int = 0) -> list[str]:
    """The flags of one file (included files expanded), checked against `known_flags`."""
    path = Path(path).expanduser()
    if depth >= MAX_DEPTH:
        raise PipelineError(
            f"--flagfile: {path}: files include each other more than {MAX_DEPTH} deep"
        )
    text = read_user_text(path, "--flagfile")
    flags: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "//")):
            continue
        where = f"--flagfile: {path} line {number}"
        name, _, value = line[2:].partition("=")
        if not line.startswith("--") or not name or " " in name:
            raise PipelineError(f"{where}: expected one --flag=value per line, got {line!r}")
        if name == "flagfile":
            if not value:
                raise PipelineError(f"{where}: --flagfile needs a file name (--flagfile=FILE)")
            nested = Path(value).expanduser()
            # Relative to the including file, so a recipe works from any folder.
            nested = nested if nested.is_absolute() else path.parent / nested
            flags += read_flagfile(nested, known_flags, depth + 1)
        elif name not in known_flags:
            raise PipelineError(
                f"{where}: unknown flag --{name}; known flags: {', '.join(sorted(known_flags))}"
            )
        else:
            flags.append(line)
    return flags


def expand_flagfiles(argv: Sequence[str], known_flags: Collection[str]) -> list[str]:
    """`argv` with every `--flagfile=FILE` (or `--flagfile FILE`) replaced by its flags."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--flagfile":
            path = next(args, None)
            if path is None or path.startswith("--"):
                raise PipelineError("--flagfile needs a file name (--flagfile=FILE)")
            out += read_flagfile(path, known_flags)
        elif arg.startswith("--flagfile="):
            path = arg.split("=", 1)[1]
            if not path:
                raise PipelineError("--flagfile needs a file name (--flagfile=FILE)")
            out += read_flagfile(path, known_flags)
        else:
            out.append(arg)
    return out
