"""Tests for the Kaggle submission step: join by ID, refusals, atomic output."""

from __future__ import annotations

import csv
import os
import pathlib
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baselines.core import submission
from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_output, atomic_write_text
from echo_download_commands import download_commands, sample_submission_command

SCRIPT = ROOT / "create_kaggle_csv.py"
ALL_ZERO = "layout:xla:random 0, layout:nlp:default 0, layout:nlp:random 0"
REAL = ROOT.parent / "shared" / "real_samples"
REAL_SAMPLE = REAL / "sample_submission.csv"
REAL_TILE_TEST = REAL / "tile_xla" / "test"


# ---------------------------------------------------------------- helpers


def write_csv(path: pathlib.Path, rows: list[tuple[str, str]], header=("ID", "TopConfigs")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        if header is not None:
            writer.writerow(header)
        writer.writerows(rows)
    return path


def read_csv(path: pathlib.Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def run_script(cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(cwd))  # Keep ~/data out of the tests.
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_refused(proc: subprocess.CompletedProcess, output: pathlib.Path, *words: str) -> str:
    """Exit 2, one `error:` line on stderr, no traceback, no output file."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not output.exists()
    assert not [p for p in output.parent.iterdir() if ".tmp-" in p.name]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def synthetic_sample(n_tile: int = 8, n_layout: int = 3) -> list[tuple[str, str]]:
    rows = [(f"tile:xla:{i:032x}", "0;1;2;3;4") for i in range(n_tile)]
    rows += [
        (f"layout:xla:default:{i:032x}", ";".join(map(str, range(10)))) for i in range(n_layout)
    ]
    return rows


@pytest.fixture
def work(tmp_path: pathlib.Path) -> pathlib.Path:
    """A foreign working directory (not the repo) to run the script from."""
    d = tmp_path / "work"
    d.mkdir()
    return d


@pytest.fixture
def small_case(work: pathlib.Path):
    """A synthetic sample and complete predictions with distinct rankings."""
    sample_rows = synthetic_sample()
    rng = random.Random(1)
    preds = {
        row_id: rng.sample(range(50), 5)
        for row_id, _ in sample_rows
        if row_id.startswith("tile:xla:")
    }
    sample = write_csv(work / "sample.csv", sample_rows)
    return work, sample, sample_rows, preds


def pred_rows(preds: dict[str, list[int]]) -> list[tuple[str, str]]:
    return [(k, ";".join(map(str, v))) for k, v in preds.items()]


# ---------------------------------------------------------- the full join


@pytest.mark.slow
def test_full_submission_from_shuffled_real_ids(work: pathlib.Path):
    if not REAL_SAMPLE.is_file():
        pytest.skip(f"real sample submission not found at {REAL_SAMPLE}")
    sample_rows = [(row[0], row[1]) for row in read_csv(REAL_SAMPLE)[1:]]  # not the code's reader
    tile_ids = [r for r, _ in sample_rows if r.startswith("tile:xla:")]
    assert len(sample_rows) == 894 and len(tile_ids) == 844
    per_collection: dict[str, int] = {}
    for row_id, _ in sample_rows:
        collection = row_id.rsplit(":", 1)[0]
        per_collection[collection] = per_collection.get(collection, 0) + 1
    layout = [c for c in per_collection if c.startswith("layout:")]
    assert len(layout) == 4

    rng = random.Random(1234)
    shuffled = tile_ids[:]
    rng.shuffle(shuffled)
    assert shuffled != tile_ids
    preds: dict[str, list[int]] = {}
    used: set[tuple[int, ...]] = set()
    for row_id in shuffled:  # Distinct rankings: any mix-up between IDs would show.
        ranking = rng.sample(range(1000), rng.randint(1, 10))
        while tuple(ranking) in used:
            ranking = rng.sample(range(1000), rng.randint(1, 10))
        used.add(tuple(ranking))
        preds[row_id] = ranking
    inputcsv = write_csv(work / "preds.csv", pred_rows(preds))
    output = work / "out" / "sub.csv"
    output.parent.mkdir()

    args = ("--inputcsv", "preds.csv", "--sample", str(REAL_SAMPLE), "--output", "out/sub.csv")
    # Tile predictions only, and dummy rows forbidden: the four layout collections are named.
    line = assert_refused(run_script(work, *args, "--no_dummy_rows"), output, "--no_dummy_rows")
    for c in layout:
        assert f"{c} all {per_collection[c]} (no input has it)" in line, (c, line)
    # Allowed (the default): the layout collections take the sample's rows, counted by name.
    proc = run_script(work, *args)
    assert proc.returncode == 0, proc.stderr
    counts = ", ".join(f"{c} {n}" for c, n in per_collection.items())
    dummies = ", ".join(f"{c} {per_collection[c]}" for c in layout)
    n_dummy = sum(per_collection[c] for c in layout)
    assert f"894 rows ({counts}), {n_dummy} dummy ({dummies})" in proc.stdout
    assert inputcsv.exists()

    got = read_csv(output)
    assert got[0] == ["ID", "TopConfigs"]
    body = got[1:]
    assert [r[0] for r in body] == [r for r, _ in sample_rows]
    sample_values = dict(sample_rows)
    for row_id, value in body:
        if row_id.startswith("tile:xla:"):
            assert value == ";".join(map(str, preds[row_id])), row_id
        else:
            assert row_id.startswith("layout:")
            assert value == sample_values[row_id]
    assert not [p for p in output.parent.iterdir() if p.name != "sub.csv"]


def test_build_submission_joins_by_id_not_position():
    sample_rows = synthetic_sample(n_tile=4, n_layout=2)
    ids = [r for r, _ in sample_rows if r.startswith("tile:")]
    preds = {ids[3]: [3, 1], ids[0]: [0], ids[2]: [2, 9, 4], ids[1]: [7]}
    joined = submission.join_submission(sample_rows, preds, allow_missing=True)
    assert joined.dummy_per_collection == {"tile:xla": 0, "layout:xla:default": 2}
    rows = joined.rows
    assert rows[:4] == [(ids[0], "0"), (ids[1], "7"), (ids[2], "2;9;4"), (ids[3], "3;1")]
    assert rows[4:] == sample_rows[4:]


def test_real_test_npz_ids_are_in_real_sample():
    if not (REAL_SAMPLE.is_file() and REAL_TILE_TEST.is_dir()):
        pytest.skip(f"real samples not found under {REAL}")
    built = submission.sample_ids_from_test_dirs(REAL_TILE_TEST)
    sample_ids = {r for r, _ in submission.read_sample_ids(REAL_SAMPLE)}
    assert len(built) == len(list(REAL_TILE_TEST.glob("*.npz"))) > 0
    assert {r for r, _ in built} <= sample_ids


# -------------------------------------------------- missing IDs / --allow_missing


@pytest.mark.slow
def test_incomplete_csv_refused_then_filled(small_case):
    work, _, sample_rows, preds = small_case
    ids = list(preds)
    dropped = [ids[1], ids[5]]
    partial = {k: v for k, v in preds.items() if k not in dropped}
    write_csv(work / "preds.csv", pred_rows(partial))
    output = work / "sub.csv"
    args = ("--inputcsv", "preds.csv", "--sample", "sample.csv", "--output", "sub.csv")

    line = assert_refused(run_script(work, *args), output, "2 of 8", "--allow_missing", dropped[0])
    assert dropped[1] in line and "missing from preds.csv" in line
    assert "layout:xla:default" not in line  # no CSV for it: its rows will be the sample's

    proc = run_script(work, *args, "--allow_missing")
    assert proc.returncode == 0, proc.stderr
    assert (
        f"11 rows (tile:xla 8, layout:xla:default 3, {ALL_ZERO}), 5 dummy "
        "(tile:xla 2, layout:xla:default 3)"
    ) in proc.stdout
    body = {r[0]: r[1] for r in read_csv(output)[1:]}
    assert [r[0] for r in read_csv(output)[1:]] == [r for r, _ in sample_rows]
    for row_id in dropped:
        assert body[row_id] == "0;1;2;3;4"
    for row_id, ranking in partial.items():
        assert body[row_id] == ";".join(map(str, ranking))


def test_library_missing_ids_message_lists_first_five():
    sample_rows = synthetic_sample(n_tile=10, n_layout=0)
    first = {sample_rows[0][0]: [4, 2]}
    with pytest.raises(PipelineError, match=r"tile:xla 9 of 10 .*, \.\.\.\).*--allow_missing"):
        submission.join_submission(sample_rows, first)
    # No input provides any sample ID: no collection stands for "given", nothing is filled.
    with pytest.raises(PipelineError, match=r"tile:xla all 10 \(no input has it\)"):
        submission.join_submission(sample_rows, {})
    joined = submission.join_submission(sample_rows, first, allow_missing=True)
    assert joined.dummy == 9 and joined.rows[0] == (sample_rows[0][0], "4;2")
    assert all(v == "0;1;2;3;4" for _, v in joined.rows[1:])


def test_library_fills_a_collection_without_input_unless_dummy_rows_are_off():
    sample_rows = synthetic_sample(n_tile=4, n_layout=3)
    tile = {r: [i, 7] for i, (r, _) in enumerate(sample_rows) if r.startswith("tile:")}
    layout = [(r, v) for r, v in sample_rows if r.startswith("layout:")]
    joined = submission.join_submission(sample_rows, tile)
    assert joined.rows == [(r, f"{tile[r][0]};7") for r in tile] + layout
    assert joined.dummy_per_collection == {"tile:xla": 0, "layout:xla:default": len(layout)}
    for allow_missing in (False, True):  # dummy_rows=False wins over allow_missing
        with pytest.raises(PipelineError, match=rf"layout:xla:default all {len(layout)} \("):
            submission.join_submission(
                sample_rows, tile, allow_missing=allow_missing, dummy_rows=False
            )
    # A collection given in part is refused by default, and with dummy rows off.
    part = tile | {layout[0][0]: [0, 1]}
    for kwargs in ({}, {"dummy_rows": False}):
        with pytest.raises(PipelineError, match=rf"layout:xla:default {len(layout) - 1} of "):
            submission.join_submission(sample_rows, part, **kwargs)
    full = part | {r: [1, 0] for r, _ in layout[1:]}
    assert submission.join_submission(sample_rows, full, dummy_rows=False).dummy == 0


# ------------------------------------------------------------- refusals


BAD_INPUTS = {
    "unknown_ids": (
        lambda preds: pred_rows(preds) + [("tile:xla:" + "f" * 32, "1;2"), ("tile:xla:zz", "3")],
        ["2 of 10", "not IDs of", "tile:xla:zz"],
    ),
    "layout_row_not_a_permutation": (  # no test file: must be a permutation of 0..len-1
        lambda preds: pred_rows(preds) + [(f"layout:xla:default:{0:032x}", "1;2")],
        [f"layout:xla:default:{0:032x}", "not a permutation", "missing 1 (0)", "out of range"],
    ),
    "duplicate_ids": (
        lambda preds: pred_rows(preds) + [pred_rows(preds)[2]],
        ["duplicate ID", "line 10", "first seen on line 4"],
    ),
    "empty_topconfigs": (
        lambda preds: [(k, "" if i == 3 else v) for i, (k, v) in enumerate(pred_rows(preds))],
        ["line 5", "TopConfigs is empty"],
    ),
    "non_integer": (
        lambda preds: [(k, "1;x;3" if i == 0 else v) for i, (k, v) in enumerate(pred_rows(preds))],
        ["line 2", "'x'"],
    ),
    "float_index": (
        lambda preds: [(k, "1.5;2" if i == 0 else v) for i, (k, v) in enumerate(pred_rows(preds))],
        ["line 2", "'1.5'"],
    ),
    "negative": (
        lambda preds: [(k, "4;-1" if i == 7 else v) for i, (k, v) in enumerate(pred_rows(preds))],
        ["line 9", "negative index '-1'"],
    ),
    "repeated_index": (
        lambda preds: [(k, "0;0;1" if i == 1 else v) for i, (k, v) in enumerate(pred_rows(preds))],
        ["line 3", "repeats index 0"],
    ),
    "zero_padded": (
        lambda preds: [
            (k, "5;0;0;0;0" if i == 1 else v) for i, (k, v) in enumerate(pred_rows(preds))
        ],
        ["line 3", "repeats index 0"],
    ),
    "header_only": (lambda preds: [], ["has a header but no rows", "--inputcsv"]),
    "three_fields": (
        lambda preds: [(k, v, "extra") for k, v in pred_rows(preds)],
        ["line 2", "expected 2 fields"],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_prediction_csv_refused(small_case, case: str):
    work, _, _, preds = small_case
    make_rows, words = BAD_INPUTS[case]
    inputcsv = write_csv(work / "preds.csv", make_rows(preds))
    output = work / "sub.csv"
    proc = run_script(
        work, "--inputcsv", "preds.csv", "--sample", "sample.csv", "--output", "sub.csv"
    )
    line = assert_refused(proc, output, *words)
    assert str(inputcsv.name) in line


@pytest.mark.slow
@pytest.mark.parametrize(
    "header", [None, ("id", "TopConfigs"), ("ID", "TopConfigs", "x"), ("ID", "Configs")]
)
def test_bad_header_refused(small_case, header):
    work, _, _, preds = small_case
    write_csv(work / "preds.csv", pred_rows(preds), header=header)  # None: no header row.
    proc = run_script(work, "--inputcsv", "preds.csv", "--sample", "sample.csv")
    assert_refused(proc, work / "predictions_kaggle.csv", "preds.csv", "ID,TopConfigs")


@pytest.mark.slow
def test_empty_prediction_file_refused(small_case):
    work, _, _, _ = small_case
    (work / "preds.csv").write_text("")
    proc = run_script(work, "--inputcsv", "preds.csv", "--sample", "sample.csv")
    assert_refused(proc, work / "predictions_kaggle.csv", "preds.csv", "empty")


@pytest.mark.slow
def test_missing_input_csv_refused(small_case):
    work, _, _, _ = small_case
    proc = run_script(work, "--sample", "sample.csv")  # Default name, absent.
    assert_refused(
        proc, work / "predictions_kaggle.csv", "predictions_output_model.csv", "not found"
    )


@pytest.mark.slow
def test_missing_sample_refused(small_case):
    work, _, _, preds = small_case
    write_csv(work / "preds.csv", pred_rows(preds))
    proc = run_script(work, "--inputcsv", "preds.csv", "--sample", "nope/sample_submission.csv")
    assert_refused(proc, work / "predictions_kaggle.csv", "nope/sample_submission.csv", "not found")


@pytest.mark.slow
def test_no_sample_and_no_test_dir_refused(small_case, tmp_path: pathlib.Path):
    work, sample, _, preds = small_case
    sample.unlink()
    write_csv(work / "preds.csv", pred_rows(preds))
    data_root = tmp_path / "data" / "npz" / "tile" / "xla"
    proc = run_script(work, "--inputcsv", "preds.csv", "--data_root", str(data_root))
    assert_refused(proc, work / "predictions_kaggle.csv", "--sample", "does not exist")
    # --allow_missing cannot help without test folders either.
    proc = run_script(
        work, "--inputcsv", "preds.csv", "--data_root", str(data_root), "--allow_missing"
    )
    assert_refused(proc, work / "predictions_kaggle.csv", "--sample", "does not exist")


@pytest.mark.slow
@pytest.mark.parametrize(
    "content,words",
    [
        ("ID,TopConfigs\n", ["no rows"]),
        ("Id,Predicted\ntile:xla:a,0\n", ["header"]),
        ("ID,TopConfigs\ntile:xla:a,0\ntile:xla:a,1\n", ["duplicate ID", "line 3"]),
        ("ID,TopConfigs\ntile:xla:a,0;;1\n", ["line 2"]),
    ],
)
def test_malformed_sample_refused(small_case, content: str, words: list[str]):
    work, sample, _, preds = small_case
    sample.write_text(content)
    write_csv(work / "preds.csv", pred_rows(preds))
    proc = run_script(work, "--inputcsv", "preds.csv", "--sample", "sample.csv")
    assert_refused(proc, work / "predictions_kaggle.csv", "sample submission", *words)


@pytest.mark.slow
def test_output_may_not_overwrite_input(small_case):
    work, _, _, preds = small_case
    inputcsv = write_csv(work / "preds.csv", pred_rows(preds))
    before = inputcsv.read_bytes()
    proc = run_script(
        work, "--inputcsv", "preds.csv", "--sample", "sample.csv", "--output", "preds.csv"
    )
    assert proc.returncode == 2 and "would overwrite" in proc.stderr
    assert inputcsv.read_bytes() == before


@pytest.mark.slow
def test_failed_run_keeps_previous_output(small_case):
    work, _, _, preds = small_case
    write_csv(work / "preds.csv", pred_rows(preds)[:-1])
    old = work / "predictions_kaggle.csv"
    old.write_text("previous\n")
    proc = run_script(work, "--inputcsv", "preds.csv", "--sample", "sample.csv")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert old.read_text() == "previous\n"
    assert sorted(p.name for p in work.iterdir()) == [
        "predictions_kaggle.csv",
        "preds.csv",
        "sample.csv",
    ]


# ------------------------------------------------- no sample: IDs from test dirs


def make_data_tree(tmp_path: pathlib.Path, with_layout: bool = True) -> pathlib.Path:
    data_root = tmp_path / "tpugraphs" / "npz" / "tile" / "xla"
    test = data_root / "test"
    test.mkdir(parents=True)
    for stem in ("cc", "aa", "bb"):
        (test / f"{stem}.npz").write_bytes(b"")
    (test / "notes.txt").write_text("not a kernel")
    (data_root / "train").mkdir()
    (data_root / "train" / "zz.npz").write_bytes(b"")
    if with_layout:
        layout = tmp_path / "tpugraphs" / "npz" / "layout"
        for source, search, stem in [
            ("nlp", "random", "n2"),
            ("nlp", "random", "n1"),
            ("xla", "default", "x1"),
            ("xla", "random", "x2"),
        ]:
            d = layout / source / search / "test"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{stem}.npz").write_bytes(b"")
        (layout / "xla" / "default" / "valid").mkdir()
        (layout / "xla" / "default" / "valid" / "v.npz").write_bytes(b"")
    return data_root


def test_sample_ids_from_test_dirs(tmp_path: pathlib.Path):
    data_root = make_data_tree(tmp_path)
    rows = submission.sample_ids_from_test_dirs(data_root / "test", data_root.parents[1] / "layout")
    assert rows == [
        ("tile:xla:aa", "0;1;2;3;4"),
        ("tile:xla:bb", "0;1;2;3;4"),
        ("tile:xla:cc", "0;1;2;3;4"),
        ("layout:xla:default:x1", "0;1;2;3;4"),
        ("layout:xla:random:x2", "0;1;2;3;4"),
        ("layout:nlp:random:n1", "0;1;2;3;4"),
        ("layout:nlp:random:n2", "0;1;2;3;4"),
    ]
    assert submission.sample_ids_from_test_dirs(data_root / "test", tmp_path / "absent") == rows[:3]
    with pytest.raises(PipelineError, match="not found"):
        submission.sample_ids_from_test_dirs(tmp_path / "absent")
    with pytest.raises(PipelineError, match="no .npz"):
        submission.sample_ids_from_test_dirs(data_root.parents[1] / "layout" / "xla")


@pytest.mark.slow
def test_cli_builds_ids_from_test_dirs(work: pathlib.Path, tmp_path: pathlib.Path):
    data_root = make_data_tree(tmp_path)
    write_csv(
        work / "preds.csv", [("tile:xla:bb", "2;0"), ("tile:xla:cc", "1"), ("tile:xla:aa", "0;4")]
    )
    proc = run_script(work, "--inputcsv", "preds.csv", "--data_root", str(data_root))
    # No sample: refused, with the Kaggle CLI line that echo_download_commands prints too.
    line = assert_refused(proc, work / "predictions_kaggle.csv", "no sample_submission.csv")
    assert sample_submission_command("~/data/tpugraphs") in line and "--allow_missing" in line
    printed = download_commands("~/data/tpugraphs", "tile")
    assert any(sample_submission_command("~/data/tpugraphs") in cmd for cmd in printed)
    proc = run_script(
        work, "--inputcsv", "preds.csv", "--data_root", str(data_root), "--allow_missing"
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "7 rows (tile:xla 3, layout:xla:default 1, layout:xla:random 1, layout:nlp:default 0, "
        "layout:nlp:random 2), 4 dummy (layout:xla:default 1, layout:xla:random 1, "
        "layout:nlp:random 2)"
    ) in proc.stdout
    assert f"sample: the test files in {data_root / 'test'}" in proc.stdout
    assert read_csv(work / "predictions_kaggle.csv") == [
        ["ID", "TopConfigs"],
        ["tile:xla:aa", "0;4"],
        ["tile:xla:bb", "2;0"],
        ["tile:xla:cc", "1"],
        ["layout:xla:default:x1", "0;1;2;3;4"],
        ["layout:xla:random:x2", "0;1;2;3;4"],
        ["layout:nlp:random:n1", "0;1;2;3;4"],
        ["layout:nlp:random:n2", "0;1;2;3;4"],
    ]


@pytest.mark.slow
def test_cli_finds_sample_beside_data(work: pathlib.Path, tmp_path: pathlib.Path):
    data_root = make_data_tree(tmp_path, with_layout=False)
    bundle = data_root.parents[2]  # tmp/tpugraphs, like ~/data/tpugraphs.
    write_csv(
        bundle / "sample_submission.csv",
        [("layout:xla:default:q", "0;1;2"), ("tile:xla:aa", "0;1;2;3;4"), ("tile:xla:cc", "0")],
    )
    write_csv(work / "preds.csv", [("tile:xla:cc", "3;1"), ("tile:xla:aa", "2")])
    args = ("--inputcsv", "preds.csv", "--data_root", str(data_root))
    proc = run_script(work, *args)  # the layout row keeps the sample's dummy
    assert proc.returncode == 0, proc.stderr
    assert "1 dummy (layout:xla:default 1)" in proc.stdout
    assert str(bundle / "sample_submission.csv") in proc.stdout
    assert read_csv(work / "predictions_kaggle.csv")[1:] == [
        ["layout:xla:default:q", "0;1;2"],
        ["tile:xla:aa", "2"],
        ["tile:xla:cc", "3;1"],
    ]
    assert submission.find_sample_submission([tmp_path, bundle]) == bundle / "sample_submission.csv"
    assert submission.find_sample_submission([tmp_path]) is None


# ------------------------------------------------------------ reading CSVs


def test_read_rankings_csv_roundtrip(tmp_path: pathlib.Path):
    path = tmp_path / "p.csv"
    path.write_text("\ufeffID,TopConfigs\ntile:xla:b, 3 ; 1;0\n\ntile:xla:a,7\n")
    got = submission.read_rankings_csv(path)
    assert got == {"tile:xla:b": [3, 1, 0], "tile:xla:a": [7]}
    assert list(got) == ["tile:xla:b", "tile:xla:a"]


def test_read_errors_name_file_and_line(tmp_path: pathlib.Path):
    path = tmp_path / "p.csv"
    path.write_text("ID,TopConfigs\ntile:xla:a,1\ntile:xla:b,1;2;1\n")
    with pytest.raises(
        PipelineError, match=r"p\.csv line 3 \(tile:xla:b\): TopConfigs repeats index 1"
    ):
        submission.read_rankings_csv(path)
    with pytest.raises(PipelineError, match=r"prediction CSV .*missing\.csv not found"):
        submission.read_rankings_csv(tmp_path / "missing.csv")
    path.write_bytes(b"ID,TopConfigs\ntile:xla:a,\xff\xfe\n")
    with pytest.raises(PipelineError, match="not UTF-8"):
        submission.read_rankings_csv(path)


# ------------------------------------------------------------ atomic output


def test_write_csv_atomic_leaves_no_temp_files(tmp_path: pathlib.Path):
    out = tmp_path / "sub.csv"
    submission.write_csv_atomic(out, submission.HEADER, [("tile:xla:a", "1;2")])
    assert out.read_text() == "ID,TopConfigs\ntile:xla:a,1;2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["sub.csv"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # Not mkstemp's 0o600.

    def rows_then_crash():
        yield ("tile:xla:b", "3")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError, match="writer died"):
        submission.write_csv_atomic(out, submission.HEADER, rows_then_crash())
    assert out.read_text() == "ID,TopConfigs\ntile:xla:a,1;2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["sub.csv"]


def test_atomic_output_keeps_suffix_and_cleans_up(tmp_path: pathlib.Path):
    dest = tmp_path / "model.keras"
    with atomic_output(dest) as tmp:
        assert tmp.parent == tmp_path and tmp.name.endswith(".keras") and ".tmp-" in tmp.name
        assert not dest.exists()
        tmp.write_bytes(b"weights")
    assert dest.read_bytes() == b"weights" and [p.name for p in tmp_path.iterdir()] == [dest.name]

    with pytest.raises(ValueError, match="boom"), atomic_output(dest) as tmp:
        tmp.write_bytes(b"half")
        raise ValueError("boom")
    assert dest.read_bytes() == b"weights" and [p.name for p in tmp_path.iterdir()] == [dest.name]

    atomic_write_text(tmp_path / "a.txt", "hello\n")
    assert (tmp_path / "a.txt").read_text() == "hello\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "model.keras"]

    with pytest.raises(PipelineError, match="does not exist"):
        atomic_write_text(tmp_path / "no_dir" / "a.txt", "x")


@pytest.mark.slow
def test_the_course_toy_path_needs_no_flags_and_says_toy_first_and_last(work: pathlib.Path):
    """Trained with --toy_data before any download: the toy test IDs stand in."""
    toy_test = sorted(p.stem for p in (ROOT / "data" / "tile_xla_toy" / "test").glob("*.npz"))
    write_csv(work / "predictions_output_model.csv", [(f"tile:xla:{t}", "1;0") for t in toy_test])
    proc = run_script(work)  # HOME is `work`: ~/data/tpugraphs/... does not exist
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert "TOY DATA" in lines[0] and "TOY DATA" in lines[-1]
    rows = read_csv(work / "predictions_kaggle.csv")
    assert rows[0] == ["ID", "TopConfigs"]
    assert rows[1:] == [[f"tile:xla:{t}", "1;0"] for t in toy_test]


@pytest.mark.slow
def test_every_hint_of_a_refusal_works_when_followed(small_case, tmp_path: pathlib.Path):
    work, sample, _, preds = small_case
    write_csv(work / "preds.csv", pred_rows(preds))
    kept = tmp_path / "kept_sample.csv"
    sample.rename(kept)
    # Downloaded test files, no sample: the message names --allow_missing, which works.
    data_root = tmp_path / "data" / "npz" / "tile" / "xla"
    (data_root / "test").mkdir(parents=True)
    for row_id in preds:
        (data_root / "test" / f"{row_id.removeprefix('tile:xla:')}.npz").write_bytes(b"")
    args = ["--inputcsv", "preds.csv", "--data_root", str(data_root)]
    message = assert_refused(run_script(work, *args), work / "predictions_kaggle.csv", "--sample")
    assert "add --allow_missing" in message
    assert sample_submission_command("~/data/tpugraphs") in message
    followed = run_script(work, *args, "--allow_missing", "--output", "partial.csv")
    assert followed.returncode == 0, followed.stderr
    assert sorted(r[0] for r in read_csv(work / "partial.csv")[1:]) == sorted(preds)
    # A data root without test files: --allow_missing could not help, so it is not named.
    empty_root = tmp_path / "empty" / "npz" / "tile" / "xla"
    empty_root.mkdir(parents=True)
    message = assert_refused(
        run_script(work, "--inputcsv", "preds.csv", "--data_root", str(empty_root)),
        work / "predictions_kaggle.csv",
        "--sample",
    )
    assert "--allow_missing" not in message
    # A --data_root that does not exist: the message names --sample, which works.
    args = ["--inputcsv", "preds.csv", "--data_root", str(tmp_path / "nowhere")]
    message = assert_refused(run_script(work, *args), work / "predictions_kaggle.csv", "--sample")
    assert "--allow_missing" not in message
    layout_ids = [r[0] for r in read_csv(kept)[1:] if r[0].startswith("layout:")]
    write_csv(work / "layout.csv", [(row_id, "2;0;1") for row_id in layout_ids])
    args[1] = "preds.csv,layout.csv"
    followed = run_script(work, *args, "--sample", str(kept), "--output", "with_sample.csv")
    assert followed.returncode == 0, followed.stderr
    assert [r[0] for r in read_csv(work / "with_sample.csv")[1:]] == [
        r[0] for r in read_csv(kept)[1:]
    ]


def test_a_layout_only_set_gives_layout_ids_only(tmp_path: pathlib.Path):
    """No tile test folder but a layout root: the layout IDs alone; neither folder: refused."""
    data_root = make_data_tree(tmp_path)
    layout = data_root.parents[1] / "layout"
    rows = submission.sample_ids_from_test_dirs(tmp_path / "no_tile", layout)
    stems = sorted(p.stem for p in layout.glob("*/*/test/*.npz"))
    assert sorted(row_id.rsplit(":", 1)[1] for row_id, _ in rows) == stems
    assert all(row_id.startswith("layout:") for row_id, _ in rows)
    with pytest.raises(PipelineError, match="not found"):
        submission.sample_ids_from_test_dirs(tmp_path / "no_tile", tmp_path / "no_layout")


def test_collections_restricts_the_join_to_the_named_collections(tmp_path: pathlib.Path):
    """A layout-only set without tile data, one collection ranked: with --collections that
    collection's rows alone, no dummy row; an unknown name is refused in one line."""
    data_root = make_data_tree(tmp_path)
    layout = data_root.parents[1] / "layout"
    shutil.rmtree(data_root)
    ranked = tmp_path / "xla_default.csv"
    np.savez(layout / "xla" / "default" / "test" / "x1.npz", config_runtime=np.ones(3))
    ranked.write_text("ID,TopConfigs\nlayout:xla:default:x1,2;0;1\n")
    out = tmp_path / "out.csv"
    common = [f"--inputcsv={ranked}", f"--data_root={data_root}", f"--layout_root={layout}"]
    common += ["--allow_missing", "--no_dummy_rows", f"--output={out}"]
    proc = run_script(tmp_path, *common, "--collections=layout:xla:default")
    assert proc.returncode == 0, proc.stderr
    assert read_csv(out) == [["ID", "TopConfigs"], ["layout:xla:default:x1", "2;0;1"]]
    out.unlink()
    assert_refused(run_script(tmp_path, *common), out, "no input provides")
    assert_refused(run_script(tmp_path, *common, "--collections=layout:xla"), out, "unknown")
