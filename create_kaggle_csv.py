#!/usr/bin/env python3
"""Puts tile and layout predictions into the Kaggle submission format, joined by ID.

Reads one or more predictions CSVs (`ID,TopConfigs`; `--inputcsv a.csv,b.csv`:
the tile CSV of tiles_gen_predictions_csv.py and one per layout collection,
every configuration index fastest first) and the Kaggle sample submission, and
writes every sample row in the sample's order with its ranking. A collection no
input has gets dummy rows (tile `0;1;2;3;4`, layout the sample's own), counted
in the summary line; `--no_dummy_rows` refuses it instead. Refused in one line:
an ID in two inputs or not in the sample, a CSV without rows, and a collection
an input covers only in part (`--allow_missing` gives those rows dummy rankings
too). A layout row must be a permutation of 0..c-1, c read from
`<layout_root>/<source>/<search>/test/<stem>.npz` (without the file, of 0..len-1).

Without `--sample`, `sample_submission.csv` is looked for in `--data_root`, its
parents up to four levels and the current directory. With `--data_root` at its
default and nothing there, the IDs come from the bundled toy set's test files
(a TOY DATA line first and last). Otherwise the script refuses and names what
works: the Kaggle CLI line, `--sample`, or `--allow_missing`, which takes the
IDs from the test splits (`<data_root>/test/*.npz`,
`<layout_root>/<source>/<search>/test`; without layout folders there are no
layout rows and Kaggle will not accept the file).

Any error prints one line and exits with status 2; no output file is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core import submission
from baselines.core.cli import entry_parser
from baselines.core.data_roots import toy_banner
from baselines.core.errors import PipelineError, run_cli
from baselines.core.io_utils import check_output_file, ensure_parent
from baselines.layout.submission import check_layout_rankings
from baselines.tiles.tile_args import DEFAULT_DATA_ROOT, TILE_PLACE
from echo_download_commands import sample_submission_command

SAMPLE_SEARCH_DEPTH = 4  # Parents of --data_root searched for sample_submission.csv.


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument(
        "--inputcsv",
        default="predictions_output_model.csv",
        help="predictions CSV (ID,TopConfigs) from tiles_gen_predictions_csv.py, or several "
        "separated by commas (tile and layout collections), joined by ID",
    )
    parser.add_argument(
        "--sample",
        default=None,
        help="Kaggle sample_submission.csv (default: looked for beside the data, see below)",
    )
    parser.add_argument("--output", default="predictions_kaggle.csv", help="submission to write")
    parser.add_argument(
        "--data_root",
        default=DEFAULT_DATA_ROOT,
        help="tile:xla data directory; its test split is <data_root>/test",
    )
    parser.add_argument(
        "--layout_root",
        default=None,
        help="layout data directory: <layout_root>/<source>/<search>/test/<stem>.npz gives "
        "each layout row's configuration count (default: <data_root>/../../layout)",
    )
    parser.add_argument(
        "--collections",
        default=None,
        help="only these collections' rows, comma-separated, e.g. tile:xla,layout:xla:default "
        "(default: every collection of the sample); a partial file Kaggle does not accept",
    )
    parser.add_argument(
        "--allow_missing",
        action="store_true",
        help="build a partial file: a CSV missing some test files of its collection is "
        "accepted, the missing rows get dummy rankings (tile 0;1;2;3;4, layout the sample's), "
        "and without a sample the IDs come from the test folders (a collection with no CSV "
        "gets dummy rows without this flag)",
    )
    parser.add_argument(
        "--no_dummy_rows",
        action="store_true",
        help="never write a dummy row: refuse any sample ID no input provides, a collection "
        "with no CSV too (overrides --allow_missing's dummy rankings)",
    )
    return parser


def sample_search_dirs(data_root: Path) -> list[Path]:
    """`data_root`, its parents up to `SAMPLE_SEARCH_DEPTH` levels (never the filesystem
    root), then the current directory, without repeats."""
    parents = [p for p in list(data_root.parents)[:SAMPLE_SEARCH_DEPTH] if p != Path(p.anchor)]
    return list(dict.fromkeys((data_root, *parents, Path.cwd())))


def resolve_sample(
    args: argparse.Namespace, data_root: Path, layout_root: Path, log
) -> tuple[list[tuple[str, str]], str, Path | None]:
    """The sample rows, where they came from and the sample file: `--sample`, else one beside the
    data, the toy set's test folder, or the test folders (`--allow_missing`)."""
    if args.sample is not None:
        sample = Path(args.sample).expanduser()
        if not sample.exists():
            raise PipelineError(
                f"sample submission {sample} (--sample) not found; download "
                f"sample_submission.csv with `{sample_submission_command('~/data/tpugraphs')}`"
            )
        return submission.read_sample_ids(sample), str(sample), sample
    search_dirs = sample_search_dirs(data_root)
    found = submission.find_sample_submission(search_dirs)
    if found is not None:
        return submission.read_sample_ids(found), str(found), found
    if not data_root.exists() and data_root == Path(DEFAULT_DATA_ROOT).expanduser().absolute():
        log(
            toy_banner(
                TILE_PLACE, f"no --data_root given and the default {data_root} does not exist"
            )
        )
        toy_test = TILE_PLACE.toy / "test"
        rows = submission.sample_ids_from_test_dirs(toy_test)
        return rows, f"the bundled toy set's test files ({toy_test}; not a Kaggle submission)", None
    tile_test = data_root / "test"
    if args.allow_missing and (tile_test.is_dir() or layout_root.is_dir()):
        rows = submission.sample_ids_from_test_dirs(tile_test, layout_root)
        found = [str(d) for d in (tile_test, layout_root) if d.is_dir()]
        source = f"the test files in {' and '.join(found)}"
        return rows, source, None
    if not data_root.exists():
        raise PipelineError(
            f"--data_root: {data_root} does not exist; pass --sample PATH (Kaggle's "
            f"{submission.SAMPLE_NAME}), or the --data_root that holds the test/ folder"
        )
    options = [
        f"get it with `{sample_submission_command('~/data/tpugraphs')}` and rerun",
        "pass --sample PATH",
    ]
    if tile_test.is_dir():
        options.append(f"add --allow_missing to build a partial file from {tile_test}")
    raise PipelineError(
        f"no {submission.SAMPLE_NAME} in {', '.join(str(d) for d in search_dirs)}: "
        + "; or ".join(options)
    )


def input_csvs(text: str) -> list[Path]:
    """The prediction CSVs of `--inputcsv` (comma-separated); each must exist, once."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise PipelineError(
            f"--inputcsv: empty item in {text!r}; give prediction CSVs separated by commas, "
            "e.g. tile.csv,layout_xla_default.csv"
        )
    paths = [Path(item).expanduser() for item in items]
    resolved = [p.resolve() for p in paths]
    for i, p in enumerate(resolved):
        if p in resolved[:i]:
            raise PipelineError(f"--inputcsv: {paths[i]} is listed twice in {text!r}")
    for path in paths:
        if not path.exists():
            raise PipelineError(
                f"prediction CSV {path} (--inputcsv) not found; write it with "
                "tiles_gen_predictions_csv.py --dir <out>/model_<hash>, or pass --inputcsv PATH"
            )
    return paths


def main() -> int:
    args = build_parser().parse_args()
    inputs = input_csvs(args.inputcsv)
    output = Path(args.output).expanduser()
    data_root = Path(args.data_root).expanduser().absolute()
    if args.layout_root is None:
        layout_root = data_root.parent.parent / "layout"
    else:
        layout_root = Path(args.layout_root).expanduser().absolute()
        if not layout_root.is_dir():
            raise PipelineError(
                f"--layout_root: {layout_root} is not a folder; pass the folder that holds "
                "<source>/<search>/test/*.npz (e.g. ~/data/tpugraphs/npz/layout)"
            )
    check_output_file(output, "--output")

    banner: list[str] = []

    def log(line: str) -> None:
        banner.append(line)
        print(line, flush=True)

    sample_rows, sample_source, sample_path = resolve_sample(args, data_root, layout_root, log)
    if args.collections is not None:
        wanted = {name.strip() for name in args.collections.split(",")}
        unknown = sorted(wanted - set(submission.COLLECTIONS))
        if unknown:
            raise PipelineError(
                f"--collections: unknown {', '.join(unknown)}; "
                f"use some of {','.join(submission.COLLECTIONS)}"
            )
        sample_rows = [r for r in sample_rows if submission.collection_of(r[0]) in wanted]
        sample_source += f" ({', '.join(sorted(wanted))} only)"
    named = [(f"--inputcsv {p}", p) for p in inputs] + [("the sample submission", sample_path)]
    for name, source in named:
        if source is not None and output.exists() and output.resolve() == source.resolve():
            raise PipelineError(f"--output {output} would overwrite {name}; choose another path")

    read = [(str(path), submission.read_rankings_csv(path)) for path in inputs]
    for label, given in read:
        if not given:  # No rows: which collection it was meant for cannot be told.
            raise PipelineError(
                f"prediction CSV {label} (--inputcsv) has a header but no rows; regenerate it, "
                "or drop it from --inputcsv (a collection with no CSV gets the sample's dummy rows)"
            )
    rankings, origin = submission.merge_rankings(read)
    submission.refuse_unknown_ids(sample_rows, rankings, origin, sample_source)
    layout_check = check_layout_rankings(rankings, origin, layout_root)
    joined = submission.join_submission(
        sample_rows,
        rankings,
        origin,
        allow_missing=args.allow_missing,
        sample_label=sample_source,
        dummy_rows=not args.no_dummy_rows,
    )
    submission.write_csv_atomic(ensure_parent(output), submission.HEADER, joined.rows)
    if layout_check is not None:
        print(layout_check.describe())

    layout_rows = sum(1 for row_id, _ in joined.rows if row_id.startswith(submission.LAYOUT_PREFIX))
    note = "" if layout_rows else "; note: no layout rows (Kaggle expects the sample's 50)"
    print(f"wrote {output}: {joined.describe()}; sample: {sample_source}{note}")
    for line in banner:  # the toy-data line, first and last
        print(line)
    return 0


if __name__ == "__main__":
    run_cli(main)
