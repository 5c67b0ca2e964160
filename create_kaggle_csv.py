#!/usr/bin/env python3
"""Puts tile predictions into the Kaggle submission format, joined by ID.

Reads the predictions CSV (`ID,TopConfigs`, written by tiles_gen_predictions_csv.py)
and the Kaggle sample submission, and writes every sample row in the sample's
order: `tile:xla:*` rows get their predicted ranking, layout rows keep the
sample's dummy. Missing or unknown tile IDs are refused (`--allow_missing` fills
missing ones with `0;1;2;3;4`).

Without `--sample`, `sample_submission.csv` is looked for in `--data_root`, its
parents up to four levels (for the default `~/data/tpugraphs/npz/tile/xla` that
reaches `~/data/tpugraphs` and a Kaggle bundle root) and the current directory.
When `--data_root` is left at its default and nothing is there (the course's
toy path: train with --toy_data before downloading anything), the IDs come from
the bundled toy set's test files, said in a TOY DATA line first and last.
Otherwise, with no sample, the script refuses and names what works: the Kaggle
CLI line that gets it, `--sample`, or `--allow_missing`, the explicit way to
build a partial file from the downloaded test splits: tile
`<data_root>/test/*.npz`, layout `<data_root>/../../layout/<source>/<search>/test`
(layout rows get the dummy `0;1;2;3;4`; without layout folders the file has no
layout rows and Kaggle will not accept it).

Any error prints one line and exits with status 2; no output file is written
(an existing one is left as it was).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.core.io_utils import check_output_file, ensure_parent
from baselines.tiles import submission
from baselines.tiles.data_roots import BUNDLED_TOY_ROOT, toy_data_banner
from baselines.tiles.train_args import DEFAULT_DATA_ROOT
from echo_download_commands import sample_submission_command

SAMPLE_SEARCH_DEPTH = 4  # Parents of --data_root searched for sample_submission.csv.


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument(
        "--inputcsv",
        default="predictions_output_model.csv",
        help="predictions CSV (ID,TopConfigs) from tiles_gen_predictions_csv.py",
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
        "--allow_missing",
        action="store_true",
        help="build a partial file: fill sample tile IDs that have no prediction with "
        "0;1;2;3;4, and without a sample take the IDs from the test folders",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def sample_search_dirs(data_root: Path) -> list[Path]:
    """Directories searched for sample_submission.csv, in order, without repeats.

    `data_root`, its parents up to `SAMPLE_SEARCH_DEPTH` levels (never the
    filesystem root), then the current directory.
    """
    parents = [p for p in list(data_root.parents)[:SAMPLE_SEARCH_DEPTH] if p != Path(p.anchor)]
    result: list[Path] = []
    for d in (data_root, *parents, Path.cwd()):
        if d not in result:
            result.append(d)
    return result


def resolve_sample(
    args: argparse.Namespace, data_root: Path, log
) -> tuple[list[tuple[str, str]], str, Path | None]:
    """Returns the sample rows, where they came from (for the summary), the sample file.

    In order: `--sample`; a sample_submission.csv beside the data; when
    `--data_root` was left at its default and nothing is there, the bundled
    toy set's test folder (the course's toy path; said in a TOY DATA line);
    with `--allow_missing`, the test folders. Otherwise the error names every
    option that works from here.
    """
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
        log(toy_data_banner(f"no --data_root given and the default {data_root} does not exist"))
        toy_test = BUNDLED_TOY_ROOT / "test"
        rows = submission.sample_ids_from_test_dirs(toy_test)
        return rows, f"the bundled toy set's test files ({toy_test}; not a Kaggle submission)", None
    tile_test = data_root / "test"
    if args.allow_missing and tile_test.is_dir():
        layout_root = data_root.parent.parent / "layout"
        rows = submission.sample_ids_from_test_dirs(tile_test, layout_root)
        source = f"the test files in {tile_test}"
        if layout_root.is_dir():
            source += f" and {layout_root}"
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


def main() -> int:
    args = parse_args()
    inputcsv = Path(args.inputcsv).expanduser()
    output = Path(args.output).expanduser()
    data_root = Path(args.data_root).expanduser().absolute()

    if not inputcsv.exists():
        raise PipelineError(
            f"prediction CSV {inputcsv} (--inputcsv) not found; write it with "
            "tiles_gen_predictions_csv.py --dir <out>/model_<hash>, or pass --inputcsv PATH"
        )
    check_output_file(output, "--output")

    banner: list[str] = []

    def log(line: str) -> None:
        banner.append(line)
        print(line, flush=True)

    sample_rows, sample_source, sample_path = resolve_sample(args, data_root, log)
    for name, source in (("--inputcsv", inputcsv), ("the sample submission", sample_path)):
        if source is not None and output.exists() and output.resolve() == source.resolve():
            raise PipelineError(f"--output {output} would overwrite {name}; choose another path")

    rankings = submission.read_rankings_csv(inputcsv)
    rows, filled = submission.build_submission(
        sample_rows,
        rankings,
        allow_missing=args.allow_missing,
        predictions_label=str(inputcsv),
        sample_label=sample_source,
    )
    submission.write_csv_atomic(ensure_parent(output), submission.HEADER, rows)

    tile_rows = sum(1 for row_id, _ in rows if row_id.startswith(submission.TILE_PREFIX))
    layout_rows = sum(1 for row_id, _ in rows if row_id.startswith(submission.LAYOUT_PREFIX))
    note = "" if layout_rows else "; note: no layout rows (Kaggle expects the sample's 50)"
    print(
        f"wrote {output}: {len(rows)} rows ({tile_rows} tile, {layout_rows} layout), "
        f"{filled} tile rows filled with {submission.FILL_RANKING}; "
        f"sample: {sample_source}{note}"
    )
    for line in banner:  # the toy-data line, first and last
        print(line)
    return 0


if __name__ == "__main__":
    run_cli(main)
