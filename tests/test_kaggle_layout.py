"""The Kaggle join of all five collections: tile:xla and layout:{xla,nlp}:{default,random}.

Hand-built samples, prediction CSVs and layout test files (only `config_runtime`,
whose length is the configuration count) in tmp_path; expectations are written
out by hand or computed here from the inputs, never by the code under test.
"""

from __future__ import annotations

import csv
import pathlib
import random

import numpy as np
import pytest
from conftest import REAL_SAMPLES
from test_submission import assert_refused as refusal
from test_submission import run_script

from baselines.core.errors import PipelineError
from baselines.layout.data import read_config_count
from baselines.layout.submission import check_layout_rankings, permutation_problem

LAYOUT_COLLECTIONS = [f"layout:{so}:{se}" for so in ("xla", "nlp") for se in ("default", "random")]


def write_csv(path: pathlib.Path, rows) -> pathlib.Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["ID", "TopConfigs"])
        writer.writerows(rows)
    return path


def read_csv(path: pathlib.Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def write_test_file(layout_root: pathlib.Path, row_id: str, configs: int) -> pathlib.Path:
    _, source, search, stem = row_id.split(":")
    path = layout_root / source / search / "test" / f"{stem}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, config_runtime=np.zeros(configs, dtype=np.int64))
    return path


def shuffled(n: int, rng: random.Random) -> list[int]:
    order = list(range(n))
    rng.shuffle(order)
    return order


@pytest.fixture
def case(tmp_path: pathlib.Path):
    """A sample with 3 tile IDs and 2 IDs per layout collection, interleaved.

    Returns (work dir, layout root, sample rows, {collection: {ID: ranking}}).
    One layout ID per collection has a test file (7, 5, 9, 6 configurations);
    the others have none, so their rankings are checked by length only.
    """
    work = tmp_path / "work"
    work.mkdir()
    layout_root = tmp_path / "npz" / "layout"
    layout_root.mkdir(parents=True)
    rng = random.Random(7)
    tile_ids = [f"tile:xla:t{i}" for i in range(3)]
    layout_ids = {c: [f"{c}:g{j}" for j in range(2)] for c in LAYOUT_COLLECTIONS}
    sample = [(tile_ids[0], "0;1;2;3;4")]
    for c in LAYOUT_COLLECTIONS:  # Each layout row its own dummy value: a mix-up shows.
        sample += [
            (i, ";".join(map(str, range(len(sample) + j + 2)))) for j, i in enumerate(layout_ids[c])
        ]
    sample += [(row_id, "0;1;2;3;4") for row_id in tile_ids[1:]]
    write_csv(work / "sample.csv", sample)
    rankings = {"tile:xla": {row_id: rng.sample(range(20), 5) for row_id in tile_ids}}
    for c, configs in zip(LAYOUT_COLLECTIONS, (7, 5, 9, 6)):
        with_file, without = layout_ids[c]
        write_test_file(layout_root, with_file, configs)
        rankings[c] = {without: shuffled(4, rng), with_file: shuffled(configs, rng)}
    return work, layout_root, sample, rankings


def write_inputs(work: pathlib.Path, rankings, collections) -> str:
    names = []
    for c in collections:
        name = c.replace(":", "_") + ".csv"
        items = list(rankings[c].items())[::-1]  # Not the sample's order.
        write_csv(work / name, [(k, ";".join(map(str, v))) for k, v in items])
        names.append(name)
    return ",".join(names)


ALL = ["tile:xla", *LAYOUT_COLLECTIONS]


@pytest.mark.slow
def test_full_join_of_five_collections(case):
    work, layout_root, sample, rankings = case
    inputs = write_inputs(work, rankings, ALL)
    proc = run_script(
        work, "--inputcsv", inputs, "--sample", "sample.csv", "--layout_root", str(layout_root)
    )
    assert proc.returncode == 0, proc.stderr
    expected = {k: ";".join(map(str, v)) for c in ALL for k, v in rankings[c].items()}
    rows = read_csv(work / "predictions_kaggle.csv")
    assert rows[0] == ["ID", "TopConfigs"]
    assert rows[1:] == [[row_id, expected[row_id]] for row_id, _ in sample]
    assert (
        "11 rows (tile:xla 3, layout:xla:default 2, layout:xla:random 2, "
        "layout:nlp:default 2, layout:nlp:random 2), 0 dummy"
    ) in proc.stdout
    # 4 rows checked against their files; the 4 without a file are counted, not silent.
    assert (
        "layout rows: 4 of 8 checked against their test file's configuration count in "
        f"{layout_root}; test file not found for 4" in proc.stdout
    )


@pytest.mark.slow
def test_single_inputcsv_form_still_works(case):
    work, layout_root, sample, rankings = case
    merged = {k: v for c in ALL for k, v in rankings[c].items()}
    write_csv(work / "all.csv", [(k, ";".join(map(str, v))) for k, v in merged.items()])
    proc = run_script(
        work, "--inputcsv", "all.csv", "--sample", "sample.csv", "--layout_root", str(layout_root)
    )
    assert proc.returncode == 0, proc.stderr
    assert read_csv(work / "predictions_kaggle.csv")[1:] == [
        [row_id, ";".join(map(str, merged[row_id]))] for row_id, _ in sample
    ]


# One layout row per case; `with_file` says whether its test file (7 configurations,
# layout:xla:default:g0) or no file (layout:xla:default:g1, checked by length) applies.
NOT_PERMUTATIONS = {
    "missing_index_vs_file": ("g0", "0;1;2;3;4;5", ["missing 1 (6)", "7 configurations"]),
    "out_of_range_vs_file": ("g0", "0;1;2;3;4;5;6;7", ["out of range 1 (7)", "g0.npz"]),
    "missing_and_out_of_range_vs_file": ("g0", "0;1;2;3;4;5;9", ["missing 1 (6)", "(9)"]),
    "out_of_range_no_file": ("g1", "0;1;2;4", ["missing 1 (3)", "out of range 1 (4)"]),
    "duplicate_index": ("g1", "0;1;1;2", ["repeats index 1", "line"]),
    "duplicate_index_vs_file": ("g0", "6;5;4;3;2;1;0;0", ["repeats index 0"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NOT_PERMUTATIONS))
def test_layout_row_that_is_not_a_permutation_is_refused(case, name: str):
    work, layout_root, _, rankings = case
    stem, bad, words = NOT_PERMUTATIONS[name]
    row_id = f"layout:xla:default:{stem}"
    rankings["layout:xla:default"][row_id] = [int(i) for i in bad.split(";")]
    inputs = write_inputs(work, rankings, ALL).split(",")
    # write_inputs joins with ';'; the bad ranking is written as given.
    write_csv(
        work / "layout_xla_default.csv",
        [
            (k, bad if k == row_id else ";".join(map(str, v)))
            for k, v in rankings["layout:xla:default"].items()
        ],
    )
    output = work / "predictions_kaggle.csv"
    proc = run_script(
        work,
        "--inputcsv",
        ",".join(inputs),
        "--sample",
        "sample.csv",
        "--layout_root",
        str(layout_root),
    )
    line = refusal(proc, output, row_id, "layout_xla_default.csv", *words)
    if "repeats" not in line:
        assert "not a permutation" in line and "list every configuration index" in line


def test_permutation_check_in_the_library(tmp_path: pathlib.Path):
    assert permutation_problem([2, 0, 1], 3) is None
    assert permutation_problem([0, 1], 3) == "missing 1 (2)"
    assert permutation_problem([0, 0, 1, 2], 3) == "duplicated 1 (0)"
    assert permutation_problem([0, 1, 2, 3, 9], 3) == "out of range 2 (3, 9)"
    assert permutation_problem([], 8) == "missing 8 (0, 1, 2, 3, 4, ...)"
    layout_root = tmp_path / "layout"
    test_file = write_test_file(layout_root, "layout:nlp:random:a", 4)
    origin = {"layout:nlp:random:a": "a.csv", "layout:nlp:random:b": "b.csv"}
    report = check_layout_rankings(
        {"layout:nlp:random:a": [3, 1, 0, 2], "layout:nlp:random:b": [1, 0], "tile:xla:x": [9]},
        origin,
        layout_root,
    )
    assert (report.with_file, report.without_file) == (1, ["layout:nlp:random:b"])
    with pytest.raises(PipelineError, match=rf"a\.csv: .*layout:nlp:random:a .*{test_file}"):
        check_layout_rankings({"layout:nlp:random:a": [1, 0, 2]}, origin, layout_root)
    assert check_layout_rankings({"tile:xla:x": [1]}, {}, layout_root) is None


def test_config_count_read_from_the_header(tmp_path: pathlib.Path):
    path = write_test_file(tmp_path, "layout:xla:random:g", 1234)
    assert read_config_count(path) == 1234
    np.savez(path, config_runtime=np.zeros((3, 2), dtype=np.int64))
    with pytest.raises(PipelineError, match="config_runtime has shape"):
        read_config_count(path)
    np.savez(path, node_feat=np.zeros(3))
    with pytest.raises(PipelineError, match="missing key"):
        read_config_count(path)
    path.write_bytes(b"not a zip")
    with pytest.raises(PipelineError, match=r"g\.npz: not a readable npz"):
        read_config_count(path)


def read_sample(path: pathlib.Path) -> list[tuple[str, str]]:
    """The sample's (ID, TopConfigs) rows, read here with the csv module."""
    return [(row[0], row[1]) for row in read_csv(path)[1:]]


def expected_summary(sample: list[tuple[str, str]], dummy: list[str]) -> str:
    """The summary's counts, from the sample's IDs: `dummy` lists the collections without input."""
    counts = {c: 0 for c in ALL}
    for row_id, _ in sample:
        counts[row_id.rsplit(":", 1)[0]] += 1
    listed = ", ".join(f"{c} {counts[c]}" for c in ALL)
    n_dummy = sum(counts[c] for c in dummy)
    named = ", ".join(f"{c} {counts[c]}" for c in dummy)
    return f"{len(sample)} rows ({listed}), {n_dummy} dummy ({named})"


@pytest.mark.slow
def test_tile_predictions_only_get_the_samples_layout_rows(case):
    work, layout_root, _, rankings = case
    sample = read_sample(work / "sample.csv")
    args = ["--inputcsv", write_inputs(work, rankings, ["tile:xla"]), "--sample", "sample.csv"]
    args += ["--layout_root", str(layout_root)]
    output = work / "predictions_kaggle.csv"
    proc = run_script(work, *args)  # No --allow_missing: the layout collections are dummies.
    assert proc.returncode == 0, proc.stderr
    assert expected_summary(sample, LAYOUT_COLLECTIONS) in proc.stdout
    tile = {k: ";".join(map(str, v)) for k, v in rankings["tile:xla"].items()}
    assert read_csv(output)[1:] == [[i, tile.get(i, value)] for i, value in sample]
    layout_rows = [row for row in read_csv(output)[1:] if row[0].startswith("layout:")]
    assert layout_rows == [[i, v] for i, v in sample if i.startswith("layout:")]
    assert len(layout_rows) == 8
    # The old command line (--allow_missing) writes the same file.
    before = output.read_bytes()
    output.unlink()
    assert run_script(work, *args, "--allow_missing").returncode == 0
    assert output.read_bytes() == before
    # --no_dummy_rows: refused, every layout collection named; even with --allow_missing.
    output.unlink()
    for extra in ([], ["--allow_missing"]):
        line = refusal(run_script(work, *args, "--no_dummy_rows", *extra), output)
        for c in LAYOUT_COLLECTIONS:
            assert f"{c} all 2 (no input has it)" in line, (c, line)
        assert "tile:xla" not in line.split("provides:")[1] and "--no_dummy_rows" in line


@pytest.mark.slow
def test_missing_collection_filled_and_counted(case):
    work, layout_root, _, rankings = case
    sample = read_sample(work / "sample.csv")
    present = [c for c in ALL if c != "layout:nlp:random"]
    args = ["--inputcsv", write_inputs(work, rankings, present), "--sample", "sample.csv"]
    args += ["--layout_root", str(layout_root)]
    output = work / "predictions_kaggle.csv"
    proc = run_script(work, *args)
    assert proc.returncode == 0, proc.stderr
    assert expected_summary(sample, ["layout:nlp:random"]) in proc.stdout
    expected = {k: ";".join(map(str, v)) for c in present for k, v in rankings[c].items()}
    expected |= {i: v for i, v in sample if i.startswith("layout:nlp:random:")}
    assert read_csv(output)[1:] == [[row_id, expected[row_id]] for row_id, _ in sample]
    output.unlink()
    line = refusal(run_script(work, *args, "--no_dummy_rows"), output, "layout:nlp:random all 2")
    assert "tile:xla" not in line.split("provides:")[1]  # only the missing one is named


@pytest.mark.slow
def test_csv_missing_test_files_of_its_collection_still_refused(case):
    work, layout_root, sample, rankings = case
    dropped = next(iter(rankings["layout:nlp:random"]))
    del rankings["layout:nlp:random"][dropped]
    args = ["--inputcsv", write_inputs(work, rankings, ALL), "--sample", "sample.csv"]
    args += ["--layout_root", str(layout_root)]
    output = work / "predictions_kaggle.csv"
    line = refusal(run_script(work, *args), output, "layout:nlp:random 1 of 2", dropped)
    assert "layout_nlp_random.csv" in line and "--allow_missing" in line
    # A CSV with a header but no rows is refused too, not taken for a collection without CSV.
    write_csv(work / "layout_nlp_random.csv", [])
    refusal(run_script(work, *args), output, "layout_nlp_random.csv", "no rows")
    # --allow_missing: the missing row takes the sample's value, counted as dummy.
    write_inputs(work, rankings, ["layout:nlp:random"])
    proc = run_script(work, *args, "--allow_missing")
    assert proc.returncode == 0, proc.stderr
    assert "), 1 dummy (layout:nlp:random 1)" in proc.stdout
    expected = {k: ";".join(map(str, v)) for c in ALL for k, v in rankings[c].items()}
    expected[dropped] = dict(read_sample(work / "sample.csv"))[dropped]
    assert read_csv(output)[1:] == [[row_id, expected[row_id]] for row_id, _ in sample]


@pytest.mark.slow
def test_duplicate_ids_across_inputs_refused(case):
    work, layout_root, _, rankings = case
    inputs = write_inputs(work, rankings, ALL)
    row_id, ranking = next(iter(rankings["layout:nlp:default"].items()))
    write_csv(work / "extra.csv", [(row_id, ";".join(map(str, ranking)))])
    output = work / "predictions_kaggle.csv"
    proc = run_script(work, "--inputcsv", inputs + ",extra.csv", "--sample", "sample.csv")
    refusal(proc, output, "1 IDs of extra.csv", "layout_nlp_default.csv", row_id)
    # The same file twice is named as such.
    proc = run_script(work, "--inputcsv", inputs + ",./tile_xla.csv", "--sample", "sample.csv")
    refusal(proc, output, "listed twice")


@pytest.mark.slow
def test_layout_id_not_in_sample_refused(case):
    work, _, _, rankings = case
    rankings["layout:xla:random"]["layout:xla:random:zz"] = [1, 0]
    inputs = write_inputs(work, rankings, ALL)
    output = work / "predictions_kaggle.csv"
    proc = run_script(work, "--inputcsv", inputs, "--sample", "sample.csv")
    refusal(proc, output, "1 of 3 IDs in layout_xla_random.csv", "layout:xla:random:zz")


# ---------------------------------------------------------------- the real samples


@pytest.mark.slow
def test_real_sample_full_submission(tmp_path: pathlib.Path):
    sample_path = REAL_SAMPLES / "sample_submission.csv"
    layout_root = REAL_SAMPLES / "layout"
    if not (sample_path.is_file() and layout_root.is_dir()):
        pytest.skip(f"real sample submission or layout samples not found under {REAL_SAMPLES}")
    with open(sample_path, newline="") as f:
        ids = [row[0] for row in list(csv.reader(f))[1:]]
    counts = {}  # config_runtime's length, read here with numpy, per ID with a test file
    for path in layout_root.glob("*/*/test/*.npz"):
        source, search = path.parts[-4], path.parts[-3]
        with np.load(path) as npz:
            counts[f"layout:{source}:{search}:{path.stem}"] = len(npz["config_runtime"])
    assert counts and set(counts) <= set(ids)
    rng = random.Random(3)
    per_collection: dict[str, list[tuple[str, str]]] = {}
    expected = {}
    for row_id in ids:
        collection = row_id.rsplit(":", 1)[0]
        n = 5 if collection == "tile:xla" else counts.get(row_id, 1000)
        expected[row_id] = ";".join(map(str, shuffled(n, rng)))
        per_collection.setdefault(collection, []).append((row_id, expected[row_id]))
    assert sorted(per_collection) == sorted(ALL)
    work = tmp_path
    names = [
        write_csv(work / f"{c.replace(':', '_')}.csv", rows).name
        for c, rows in per_collection.items()
    ]
    args = ["--inputcsv", ",".join(names), "--sample", str(sample_path)]
    args += ["--layout_root", str(layout_root)]
    proc = run_script(work, *args)
    assert proc.returncode == 0, proc.stderr
    assert (
        "894 rows (tile:xla 844, layout:xla:default 8, layout:xla:random 8, "
        "layout:nlp:default 17, layout:nlp:random 17), 0 dummy"
    ) in proc.stdout
    assert f"layout rows: {len(counts)} of 50 checked against" in proc.stdout
    assert read_csv(work / "predictions_kaggle.csv")[1:] == [[i, expected[i]] for i in ids]
    # A row one configuration short of its real test file is refused, naming the file.
    row_id = sorted(counts)[0]
    short = ";".join(map(str, range(counts[row_id] - 1)))
    collection = row_id.rsplit(":", 1)[0]
    rows = [(k, short if k == row_id else v) for k, v in per_collection[collection]]
    write_csv(work / f"{collection.replace(':', '_')}.csv", rows)
    proc = run_script(work, *args, "--output", "again.csv")
    stem = row_id.rsplit(":", 1)[1]
    refusal(proc, work / "again.csv", row_id, f"{stem}.npz", f"missing 1 ({counts[row_id] - 1})")
