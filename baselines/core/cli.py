"""Argument parsers of the entry scripts: no abbreviations, defaults in --help, one-line errors."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from baselines.core.args_record import flag_type, old_spelling_notes
from baselines.core.distribution import add_strategy_flag
from baselines.core.errors import PipelineError
from baselines.core.flagfile import expand_flagfiles


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows a flag's default once: not when its help already says it, nor when it is None."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or action.default in (None, argparse.SUPPRESS):
            return text
        if action.option_strings and action.nargs != 0:
            return text + " (default: %(default)s)"
        return text


def did_you_mean(given: str, known: list[str]) -> str:
    """'; did you mean --x?' for the closest of `known`, or ''."""
    close = difflib.get_close_matches(given, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


class EntryParser(argparse.ArgumentParser):
    """Refuses bad flags in one line (a PipelineError), with "did you mean" for a typo."""

    def option_names(self) -> list[str]:
        return [s for a in self._actions for s in a.option_strings if s.startswith("--")]

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            flag = extra[0].split("=", 1)[0]
            hint = did_you_mean(flag, self.option_names()) if flag.startswith("--") else ""
            raise PipelineError(f"unknown flag {extra[0]}{hint} (see --help)")
        return parsed

    def error(self, message: str) -> NoReturn:
        raise PipelineError(f"{message} (see --help)")


def entry_parser(doc: str | None, *, epilog: str | None = None) -> EntryParser:
    """A parser whose description is the first paragraph of a script's docstring."""
    return EntryParser(
        description=(doc or "").split("\n\n")[0],
        epilog=epilog,
        allow_abbrev=False,
        formatter_class=HelpFormatter,
    )


def parse_bool(text: str) -> bool:
    """absl's spellings of a boolean flag's value."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "y", "t"):
        return True
    if value in ("0", "false", "no", "n", "f"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_bool_flag(parser: argparse.ArgumentParser, name: str, help: str) -> None:
    """A boolean flag, default false: `--flag`, `--flag=true` or `--flag=false`."""
    parser.add_argument(name, type=parse_bool, nargs="?", const=True, default=False, help=help)


def field_help(field: dataclasses.Field) -> str:
    return field.metadata.get("help", "")


def add_field_flags(
    parser: argparse.ArgumentParser,
    record: type,
    *,
    default: Callable[[dataclasses.Field], Any],
    help: Callable[[dataclasses.Field], str] = field_help,
) -> None:
    """One `--<field>` flag per field of dataclass `record` (an `ArgsRecord`'s init-only ones
    too), typed like the field."""
    fields = record.flag_fields() if hasattr(record, "flag_fields") else dataclasses.fields(record)
    for field in fields:
        kind = {"bool": parse_bool, "int": int, "float": float}.get(flag_type(field), str)
        extra = {"nargs": "?", "const": True} if kind is parse_bool else {}
        parser.add_argument(
            f"--{field.name}", type=kind, default=default(field), help=help(field), **extra
        )


def training_parser(doc: str | None, record: type) -> EntryParser:
    """A training script's parser: one flag per field of `record` (an `ArgsRecord`), and
    `--strategy` (not a field: the same recipe on 1 or N devices is the same run)."""
    parser = entry_parser(
        doc,
        epilog="--flagfile=FILE reads one --flag=value per line (absl's convention); "
        "flags after it override it.",
    )
    add_field_flags(parser, record, default=lambda field: field.default)
    add_strategy_flag(parser)
    return parser


def parse_training_command(
    parser: argparse.ArgumentParser,
    record: type,
    argv: list[str] | None,
    log: Callable[[str], None],
) -> tuple[Any, str]:
    """(`record` of a training script's flags, its `--strategy`), `--flagfile=FILE` expanded
    in place (later flags win); what an old spelling does is said through `log`."""
    argv = sys.argv[1:] if argv is None else argv
    flags = vars(parser.parse_args(expand_flagfiles(argv, record.flag_names() | {"strategy"})))
    strategy = flags.pop("strategy")
    for note in old_spelling_notes(flags):
        log(note)
    return record(**flags), strategy
