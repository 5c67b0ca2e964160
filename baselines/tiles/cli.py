"""Argument parsers of the entry scripts: no abbreviations, defaults in --help.

    parser = entry_parser(__doc__)
    parser.add_argument("--epochs", type=int, default=100, help="maximum epochs")
    add_field_flags(parser, TrainArgs, default=lambda f: f.default, help=lambda f: HELP[f.name])

argparse accepts any unique prefix of a flag by default (`--epoch=5` for
`--epochs`); absl, which upstream's scripts use, does not, and a typo that
silently lands on another flag is worse than an error. TensorFlow-free, so
scripts can refuse bad flags before the slow import.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows every flag's default and keeps the epilog's line breaks."""


def entry_parser(doc: str | None, *, epilog: str | None = None) -> argparse.ArgumentParser:
    """A parser whose description is the first paragraph of a script's docstring."""
    return argparse.ArgumentParser(
        description=(doc or "").split("\n\n")[0],
        epilog=epilog,
        allow_abbrev=False,
        formatter_class=_HelpFormatter,
    )


def parse_bool(text: str) -> bool:
    """absl's spellings of a boolean flag's value."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "y", "t"):
        return True
    if value in ("0", "false", "no", "n", "f"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_field_flags(
    parser: argparse.ArgumentParser,
    record: type,
    *,
    default: Callable[[dataclasses.Field], Any],
    help: Callable[[dataclasses.Field], str],
) -> None:
    """One `--<field>` flag per field of dataclass `record`, typed like the field.

    A bool field takes `--flag`, `--flag=true` or `--flag=false` (absl's forms).
    """
    for field in dataclasses.fields(record):
        kind = {"bool": parse_bool, "int": int, "float": float}.get(str(field.type), str)
        extra = {"nargs": "?", "const": True} if kind is parse_bool else {}
        parser.add_argument(
            f"--{field.name}", type=kind, default=default(field), help=help(field), **extra
        )
