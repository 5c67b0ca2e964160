"""Argument parsers of the entry scripts: no abbreviations, defaults in --help.

    parser = entry_parser(__doc__)
    parser.add_argument("--epochs", type=int, default=100, help="maximum epochs")

argparse accepts any unique prefix of a flag by default (`--epoch=5` for
`--epochs`); absl, which upstream's scripts use, does not, and a typo that
silently lands on another flag is worse than an error. TensorFlow-free, so
scripts can refuse bad flags before the slow import.
"""

from __future__ import annotations

import argparse


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
