"""Recipes as flagfiles: absl's format, override order, refusals, the shipped recipes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

import tiles_train
from baselines.core.errors import PipelineError
from baselines.core.flagfile import expand_flagfiles
from baselines.tiles.tile_args import TrainArgs

KNOWN = {"model", "epochs", "lr", "toy_data"}


def test_flagfile_lines_expand_in_place_and_later_flags_win(tmp_path):
    inner = tmp_path / "inner.flags"
    inner.write_text("--lr=0.5\n")
    recipe = tmp_path / "r.flags"
    recipe.write_text(
        "# a comment\n\n  --model=MLP  \n// another comment\n--epochs=7\n"
        "--flagfile=inner.flags\n--toy_data\n"  # relative to the including file
    )
    argv = ["--epochs=1", f"--flagfile={recipe}", "--lr=0.1"]
    assert expand_flagfiles(argv, KNOWN) == [
        "--epochs=1",
        "--model=MLP",
        "--epochs=7",
        "--lr=0.5",
        "--toy_data",
        "--lr=0.1",
    ]
    args = tiles_train.parse_args(argv)
    assert (args.model, args.epochs, args.lr, args.max_files) == ("MLP", 7, 0.1, 100)
    # A flag before the flagfile is overridden by it; after it, it overrides.
    assert tiles_train.parse_args(["--flagfile", str(recipe), "--epochs=3"]).epochs == 3


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "not found"),
        ("model=MLP\n", "line 1: expected one --flag=value per line"),
        ("--epochs=2\n--modle=MLP\n", "line 2: unknown flag --modle"),
        (b"\xff\xfe--model\n", "cannot read"),
        ("--flagfile=\n", "needs a file name"),
    ],
)
def test_bad_flagfiles_are_refused_with_the_line(tmp_path, content, message):
    path = tmp_path / "bad.flags"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(PipelineError, match=message):
        expand_flagfiles([f"--flagfile={path}"], KNOWN | {"flagfile"})


@pytest.mark.slow
def test_bad_flagfile_on_the_command_line_is_one_line_and_writes_nothing(tmp_path):
    recipe = tmp_path / "r.flags"
    recipe.write_text("--model=MLP\n--epochz=3\n")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tiles_train.py"), f"--flagfile={recipe}", f"--out_dir={out}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        timeout=300,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --flagfile: ") and "line 2: unknown flag --epochz" in last
    assert not out.exists()


# Tile recipes; the layout ones (configs/layout/) are layout_train.py's, checked in
# test_layout_recipes.py.
SHIPPED = sorted(
    str(p.relative_to(ROOT / "configs"))[:-6]
    for p in ROOT.glob("configs/**/*.flags")
    if ROOT / "configs" / "layout" not in (p.parent, *p.parents)
)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_recipes_parse_and_validate(name):
    args = tiles_train.parse_args([f"--flagfile={ROOT / 'configs' / f'{name}.flags'}"])
    args.validate()
    if name == "baseline":
        assert args == TrainArgs()  # the baseline's defaults, nothing else


def _train_recipe(tmp_path, data_root, *extra):
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tiles_train.py"),
            f"--flagfile={ROOT / 'configs' / 'recommended.flags'}",
            "--epochs=1",
            f"--data_root={data_root}",
            f"--out_dir={out}",
            f"--cache_dir={tmp_path / 'cache'}",
            *extra,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_file,) = out.glob("run_*.jsonz")
    with gzip.open(run_file) as f:
        return json.loads(f.read())


@pytest.mark.slow
def test_recommended_recipe_trains_on_the_bundled_and_real_data(tmp_path, sample_root):
    record = _train_recipe(tmp_path, sample_root)
    recipe = tiles_train.parse_args([f"--flagfile={ROOT / 'configs' / 'recommended.flags'}"])
    assert record["args"]["model"] == recipe.model
    assert record["args"]["model_kwargs_json"] == recipe.model_kwargs_json
    assert record["args"]["epochs"] == 1  # the later flag won
    assert all(0 <= v for v in record["final_error"]["val"].values())
