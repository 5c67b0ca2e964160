#!/usr/bin/env python3
"""Writes the docs' generated tables from the code: every script's flags, the models' kwargs.

    python tools/docs_tables.py            # rewrites the tables in docs/*.md
    python tools/docs_tables.py --check    # exit 1 if a table is out of date (a test runs this)

A flag is described once, in its parser (`TrainArgs` field help for the
training flags); a model's kwargs are read off the classes of models.py
(`model_builder.model_kwargs`). In the docs, a generated table sits between
`<!-- generated:NAME:start -->` and `<!-- generated:NAME:end -->`; NAME is a
script (`tiles_train.py`, ...) or `model-kwargs`.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DOCS = ROOT / "docs"
MARKER = re.compile(
    r"(<!-- generated:(?P<name>[\w.-]+):start -->\n)(?P<body>.*?)"
    r"(<!-- generated:(?P=name):end -->)",
    re.S,
)


def _parser_of(module: str, builder: str = "build_parser") -> Callable[[], argparse.ArgumentParser]:
    return lambda: getattr(importlib.import_module(module), builder)()


# Scripts whose flags the docs list: name -> its parser.
PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "tiles_train.py": _parser_of("tiles_train"),
    "tiles_gen_predictions_csv.py": _parser_of("tiles_gen_predictions_csv"),
    "tiles_evaluate.py": _parser_of("tiles_evaluate"),
    "create_kaggle_csv.py": _parser_of("create_kaggle_csv"),
    "tiles_beam_experiments.py": _parser_of("tiles_beam_experiments"),
    "echo_download_commands.py": _parser_of("echo_download_commands"),
    "layout_train.py": _parser_of("layout_train"),
    "layout_gen_predictions_csv.py": _parser_of("layout_gen_predictions_csv"),
    "layout_evaluate.py": _parser_of("layout_evaluate"),
    "layout_beam_experiments.py": _parser_of("layout_beam_experiments"),
    "kaggle_submission.py": _parser_of("kaggle_submission"),
}


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def flag_table(
    parser: argparse.ArgumentParser, skip: Callable[[str], bool] = lambda _: False
) -> str:
    """A markdown table of a parser's flags: flag, default, meaning (its help)."""
    lines = ["| flag | default | meaning |", "|---|---|---|"]
    for action in parser._actions:
        flags = [s for s in action.option_strings if s.startswith("--")]
        if not flags or flags[0] == "--help" or skip(flags[0][2:]):
            continue
        if action.required:
            default = "(required)"
        elif action.default in (None, "", argparse.SUPPRESS) or action.nargs == 0:
            default = ""
        else:
            default = f"`{action.default}`"
        meaning = action.help or ""
        if action.choices:
            meaning += f" (one of {', '.join(map(str, action.choices))})"
        lines.append(f"| `{flags[0]}` | {_cell(default)} | {_cell(meaning)} |")
    return "\n".join(lines) + "\n"


def model_kwargs_table() -> str:
    """A markdown table of every model of models.py and the kwargs it takes."""
    from baselines.tiles.model_builder import model_classes, model_kwargs

    lines = ["| model | kwargs |", "|---|---|"]
    for name in model_classes():
        kwargs = model_kwargs(name)
        lines.append(f"| `{name}` | {', '.join(f'`{k}`' for k in kwargs)} |")
    return "\n".join(lines) + "\n"


def table(name: str) -> str:
    if name == "model-kwargs":
        return model_kwargs_table()
    if name == "tiles_beam_experiments.py":
        from baselines.tiles.tile_args import TrainArgs

        # Its training flags are tiles_train.py's (listed there), set in every run.
        return flag_table(PARSERS[name](), skip=lambda flag: flag in TrainArgs.flag_names())
    if name == "layout_beam_experiments.py":
        from baselines.layout.layout_args import LayoutTrainArgs

        # Its training flags are layout_train.py's (listed there), set in every run.
        return flag_table(
            PARSERS[name](), skip=lambda flag: flag in LayoutTrainArgs.flag_names() | {"strategy"}
        )
    if name not in PARSERS:
        raise KeyError(f"no generated table named {name!r}")
    return flag_table(PARSERS[name]())


def render(text: str) -> str:
    """`text` with every generated table replaced by the code's current one."""
    return MARKER.sub(lambda m: m.group(1) + table(m.group("name")) + m.group(4), text)


def stale_files(docs: list[Path]) -> list[Path]:
    return [path for path in docs if render(path.read_text()) != path.read_text()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--check", action="store_true", help="only report stale tables")
    args = parser.parse_args()
    docs = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
    stale = stale_files(docs)
    if args.check:
        for path in stale:
            print(f"stale generated table in {path.relative_to(ROOT)}: run tools/docs_tables.py")
        return 1 if stale else 0
    for path in stale:
        path.write_text(render(path.read_text()))
        print(f"updated {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
