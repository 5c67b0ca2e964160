#!/usr/bin/env python3
"""Prints the shell commands that download and unpack the TpuGraphs npz files.

    python echo_download_commands.py | bash          # tile:xla into ~/data/tpugraphs
    python echo_download_commands.py --collections all --dest /data/tpugraphs

Each tar is fetched unless present, then untarred into `<dest>/npz/...`. The
Kaggle "predict-ai-model-runtime" bundle holds the same files plus
sample_submission.csv.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.cli import entry_parser
from baselines.core.errors import run_cli

BASE_URL = "http://download.tensorflow.org/data/tpu_graphs/v0"
KAGGLE_COMPETITION = "predict-ai-model-runtime"


def sample_submission_command(dest: str) -> str:
    """The Kaggle CLI line that fetches sample_submission.csv (printed as a comment: it needs the
    `kaggle` CLI and an API token)."""
    where = dest if dest.startswith("~/") and " " not in dest else shlex.quote(dest)
    return (
        f"kaggle competitions download -c {KAGGLE_COMPETITION} -f sample_submission.csv -p {where}"
    )


SPLITS = ("train", "valid", "test")


def tar_names(collections: str) -> list[str]:
    """Tar file names of the chosen collections (tile, layout or all)."""
    names = []
    if collections in ("tile", "all"):
        names += [f"npz_tile_xla_{split}.tar" for split in SPLITS]
    if collections in ("layout", "all"):
        names += [
            f"npz_layout_{source}_{search}_{split}.tar"
            for source in ("xla", "nlp")
            for search in ("default", "random")
            for split in SPLITS
        ]
    return names


def download_commands(dest: str, collections: str) -> list[str]:
    """mkdir, then curl-unless-present and tar for every file."""
    # Keep a leading ~ unquoted so the shell expands it.
    where = dest if dest.startswith("~/") and " " not in dest else shlex.quote(dest)
    lines = [f"mkdir -p {where}", f"cd {where}"]
    for name in tar_names(collections):
        lines.append(f"[ -f {name} ] || curl -fL -o {name} {BASE_URL}/{name}")
        lines.append(f"tar xf {name}")
    lines.append(
        "# create_kaggle_csv.py needs Kaggle's sample_submission.csv (Kaggle CLI, API token):"
    )
    lines.append(f"# {sample_submission_command(dest)}  (unzip it if it arrives zipped)")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__)
    parser.add_argument("--dest", default="~/data/tpugraphs", help="download folder")
    parser.add_argument(
        "--collections",
        choices=("tile", "layout", "all"),
        default="tile",
        help="which collections' tar files to download",
    )
    return parser


def main() -> int:
    args = build_parser().parse_args()
    print("\n".join(download_commands(args.dest, args.collections)))
    return 0


if __name__ == "__main__":
    run_cli(main)
