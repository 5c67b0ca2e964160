"""Nothing silently wrong: data choice, run identity, the model + run file
unit under injected faults, full disks, stale temporaries, odd --configs values."""

from __future__ import annotations

import builtins
import dataclasses
import errno
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import write_random_root

from baselines.core import io_utils
from baselines.core.args_record import TOY_MAX_FILES
from baselines.core.errors import PipelineError
from baselines.core.run_files import model_fingerprint
from baselines.core.saved_model import save_run
from baselines.core.submission import HEADER, write_csv_atomic
from baselines.tiles import data, model_builder, run_records, task
from baselines.tiles.model_builder import build_model, create_variables
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT, TILE_PLACE, TrainArgs


def _enospc(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


# --- data choice and run identity ------------------------------------------------------


def test_training_refuses_a_mistyped_data_root_before_writing(tmp_path):
    args = TrainArgs(
        model="MLP",
        data_root=str(tmp_path / "tpugraps_typo"),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
    )
    with pytest.raises(PipelineError, match="--data_root: .*tpugraps_typo does not exist"):
        train(args)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def train(args: TrainArgs, lines: list[str] | None = None) -> dict:
    return task.train(args, progress=False, log=(lines if lines is not None else []).append)


def _largest_train_kernel(root: Path) -> int:
    files = sorted((root / "train").glob("*.npz"))[:TOY_MAX_FILES]
    return max(np.load(f)["config_feat"].shape[0] for f in files)


def test_toy_fallback_says_so_first_and_last_and_keeps_its_own_hash(tmp_path, monkeypatch):
    """No --data_root and no default data: toy set, a banner at both ends, a hash of its
    own (so real data later never overwrites it), and --configs capped at the largest kernel."""
    default = tmp_path / "nothing_downloaded_yet"
    monkeypatch.setattr(task, "TILE_PLACE", dataclasses.replace(TILE_PLACE, default=str(default)))
    args = TrainArgs(
        model="MLP",
        epochs=1,
        configs=5000,
        toy_data=True,
        data_root=str(default),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
    )
    lines: list[str] = []
    record = train(args, lines)
    assert "TOY DATA" in lines[0] and "TOY DATA" in lines[-1]
    assert record["data"]["toy_fallback"] is True
    assert Path(record["data"]["root"]) == BUNDLED_TOY_ROOT
    assert record["run_hash"] != args.run_hash()
    assert (tmp_path / "out" / f"model_{record['run_hash']}").is_dir()
    largest = _largest_train_kernel(BUNDLED_TOY_ROOT)
    assert record["configs"] == largest < 5000
    assert (
        sum(
            f"--configs=5000 is more than the largest train kernel has ({largest:,})" in x
            for x in lines
        )
        == 1
    )


def test_runs_on_changed_data_never_share_a_model_or_tensorboard_folder(tmp_path):
    root = write_random_root(tmp_path / "root", sizes={"train": 6, "valid": 3})
    out = tmp_path / "out"
    args = TrainArgs(
        model="MLP",
        epochs=1,
        configs=4,
        batch=4,
        data_root=str(root),
        out_dir=str(out),
        cache_dir=str(tmp_path / "cache"),
    )
    first = train(args)
    assert first["run_hash"] == args.run_hash()  # the baseline's hash for the first data
    first_model = model_fingerprint(out / f"model_{first['run_hash']}")

    # Same flags, the data changed underneath (one kernel's runtimes).
    target = sorted((root / "train").glob("*.npz"))[0]
    arrays = dict(np.load(target))
    arrays["config_runtime"] = arrays["config_runtime"][::-1].copy()
    np.savez(target, **arrays)
    lines: list[str] = []
    second = train(args, lines)
    assert second["run_hash"] != first["run_hash"]
    assert any("named with its data identity" in x for x in lines)
    assert second["data"]["identity"] != first["data"]["identity"]
    # The first run's model, run file and TensorBoard logs are untouched.
    assert model_fingerprint(out / f"model_{first['run_hash']}") == first_model
    again, _ = run_records.read_run_for_model(out / f"model_{first['run_hash']}")
    assert again["data"]["identity"] == first["data"]["identity"]
    marker = json.loads((out / f"tb_{first['run_hash']}" / "data_identity.json").read_text())
    assert marker["identity"] == first["data"]["identity"]
    assert (out / f"tb_{second['run_hash']}").is_dir()

    # A rerun on the same (changed) data is the same run again.
    third = train(args)
    assert third["run_hash"] == second["run_hash"]
    assert len(list(out.glob("model_*"))) == 2


def test_layout_runs_on_changed_data_get_their_own_name_too(tmp_path):
    """The same rule for a layout collection: a layout run of the same flags on other data
    (one train graph fewer) is named with its data identity; the same data keeps the name."""
    from baselines.layout import task as layout_task
    from baselines.layout.layout_args import BUNDLED_TOY_ROOT as LAYOUT_TOY
    from baselines.layout.layout_args import LayoutTrainArgs

    root = tmp_path / "layout"
    shutil.copytree(LAYOUT_TOY / "xla" / "default", root / "xla" / "default")
    out = tmp_path / "out"
    args = LayoutTrainArgs(
        search="default",
        data_root=str(root),
        out_dir=str(out),
        epochs=1,
        configs=4,
        batch=2,
        results_csv="None",
        final_validation=False,
        model_kwargs_json='{"hidden_dim": 8}',
    )
    first = layout_task.train(args, log=lambda _: None)
    assert first["run_hash"] == args.run_hash() and first["data"]["identity"]
    assert layout_task.train(args, log=lambda _: None)["run_hash"] == first["run_hash"]
    sorted((root / "xla" / "default" / "train").glob("*.npz"))[0].unlink()
    lines: list[str] = []
    second = layout_task.train(args, log=lines.append)
    assert second["run_hash"] != first["run_hash"]
    assert any("named with its data identity" in x for x in lines)
    assert second["data"]["fingerprints"]["valid"] == first["data"]["fingerprints"]["valid"]
    assert second["data"]["fingerprints"]["train"] != first["data"]["fingerprints"]["train"]


# --- model + run file: one unit -------------------------------------------------------


def _tiny_model(seed: int):
    tf.keras.utils.set_random_seed(seed)
    model = build_model("MLP", 4, {"hidden_dim": 4, "op_embedding_dim": 2})
    create_variables(model, compiled=False)
    return model


def _record(tag: str) -> dict:
    stats = {
        "node_mean": [0.0] * 140,
        "node_std": [1.0] * 140,
        "config_mean": [0.0] * 24,
        "config_std": [1.0] * 24,
    }
    return {
        "model": "MLP",
        "model_kwargs": {"hidden_dim": 4, "op_embedding_dim": 2},
        "configs": 4,
        "feature_stats": stats,
        "tag": tag,
    }


def _assert_consistent_pair(model_dir: Path, weights: dict[str, np.ndarray]) -> str:
    """The record read for `model_dir` is the one saved with its weights; returns its tag."""
    record, _ = run_records.read_run_for_model(model_dir)
    restored = model_builder.restore_model(model_dir, record)
    np.testing.assert_array_equal(restored.trainable_variables[0].numpy(), weights[record["tag"]])
    return record["tag"]


class _FailAt:
    """Makes the n-th call of os.rename / os.replace (counted together) raise."""

    def __init__(self, monkeypatch, n: int):
        self.calls, self.n = 0, n
        for name in ("rename", "replace"):
            real = getattr(os, name)
            monkeypatch.setattr(os, name, self._wrap(real))

    def _wrap(self, real):
        def call(*args, **kwargs):
            self.calls += 1
            if self.calls == self.n:
                raise OSError(errno.EIO, "injected fault")
            return real(*args, **kwargs)

        return call


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "move_aside"])
def test_a_fault_at_any_rename_leaves_a_consistent_pair(tmp_path, monkeypatch, exchange):
    old_model, new_model = _tiny_model(1), _tiny_model(2)
    weights = {
        "old": old_model.trainable_variables[0].numpy(),
        "new": new_model.trainable_variables[0].numpy(),
    }
    assert not np.array_equal(weights["old"], weights["new"])
    if not exchange:  # filesystems without renameat2(RENAME_EXCHANGE)
        monkeypatch.setattr(
            io_utils, "exchange_paths", lambda *_: (_ for _ in ()).throw(OSError(errno.ENOSYS, ""))
        )
    outcomes = set()
    for n in range(1, 8):
        folder = tmp_path / f"n{n}"
        folder.mkdir()
        model_dir, run_path = folder / "model_h", folder / "run_h.jsonz"
        save_run(old_model, _record("old"), model_dir, run_path)
        with monkeypatch.context() as m:
            fault = _FailAt(m, n)
            try:
                save_run(new_model, _record("new"), model_dir, run_path)
                failed = False
            except PipelineError as e:
                assert "\n" not in str(e) and "injected fault" in str(e)
                failed = True
        outcomes.add(_assert_consistent_pair(model_dir, weights))
        assert not _temporaries(folder), (n, _temporaries(folder))
        if not failed:
            assert fault.calls < n  # every rename ran before the fault would have hit
            assert _assert_consistent_pair(model_dir, weights) == "new"
            break
    assert outcomes == {"old", "new"}


@pytest.mark.slow
def test_a_model_moved_aside_by_a_killed_swap_is_put_back(tmp_path):
    """The state a kill between the two renames of the move-aside swap leaves: the
    previous model only under `model_h.tmp-<dead pid>-<host>-old-*/`."""
    model = _tiny_model(1)
    save_run(model, _record("old"), tmp_path / "model_h", tmp_path / "run_h.jsonz")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(dead.stdout)
    aside = tmp_path / f"model_h.tmp-{pid}-{io_utils._host_tag()}-old-abc123"
    aside.mkdir()
    os.rename(tmp_path / "model_h", aside / "model_h")
    lines: list[str] = []
    removed = io_utils.remove_stale_temporaries(tmp_path, lines.append)
    assert removed == [aside.name] and len(lines) == 1 and "put back model_h" in lines[0]
    weights = {"old": model.trainable_variables[0].numpy()}
    assert _assert_consistent_pair(tmp_path / "model_h", weights) == "old"


# --- full disk ---------------------------------------------------------------------------


def test_full_disk_while_saving_the_model_keeps_the_previous_pair(tmp_path, monkeypatch):
    old_model, new_model = _tiny_model(1), _tiny_model(2)
    weights = {"old": old_model.trainable_variables[0].numpy()}
    model_dir, run_path = tmp_path / "model_h", tmp_path / "run_h.jsonz"
    save_run(old_model, _record("old"), model_dir, run_path)

    def full(*_args, **_kwargs):
        raise tf.errors.ResourceExhaustedError(
            None, None, "variables.data: No space left on device"
        )

    monkeypatch.setattr(type(new_model), "save", full)
    with pytest.raises(PipelineError, match=r"cannot write .*model_h: disk full"):
        save_run(new_model, _record("new"), model_dir, run_path)
    assert _assert_consistent_pair(model_dir, weights) == "old"
    assert not _temporaries(tmp_path)


def test_full_disk_while_writing_the_run_file_keeps_the_previous_pair(tmp_path, monkeypatch):
    old_model, new_model = _tiny_model(1), _tiny_model(2)
    weights = {"old": old_model.trainable_variables[0].numpy()}
    model_dir, run_path = tmp_path / "model_h", tmp_path / "run_h.jsonz"
    save_run(old_model, _record("old"), model_dir, run_path)
    monkeypatch.setattr(gzip.GzipFile, "write", _enospc)
    with pytest.raises(PipelineError, match=r"cannot write .*: disk full \(No space left"):
        save_run(new_model, _record("new"), model_dir, run_path)
    monkeypatch.undo()
    assert _assert_consistent_pair(model_dir, weights) == "old"
    assert run_records.read_run_file(run_path)["tag"] == "old"
    assert not _temporaries(tmp_path)


def test_full_disk_while_writing_a_csv_is_one_line(tmp_path, monkeypatch):
    real_open = builtins.open

    class FullFile:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, *_):
            _enospc()

    def opening(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        return FullFile(f) if "w" in mode and ".tmp-" in str(path) else f

    monkeypatch.setattr(builtins, "open", opening)
    out = tmp_path / "p.csv"
    with pytest.raises(PipelineError, match=r"cannot write .*p\.csv: disk full"):
        write_csv_atomic(out, HEADER, [("tile:xla:a", "1;2")])
    monkeypatch.undo()
    assert not out.exists() and not _temporaries(tmp_path)


def test_full_disk_in_the_cache_is_one_line(tmp_path, monkeypatch):
    root = write_random_root(tmp_path / "root", sizes={"train": 3})
    monkeypatch.setattr(np, "save", _enospc)
    with pytest.raises(PipelineError, match="cannot write the cache .*No space left"):
        data.load_split(root / "train", cache_dir=tmp_path / "cache", progress=False)
    monkeypatch.undo()
    assert not _temporaries(tmp_path / "cache")


def test_full_disk_in_the_tensorboard_writer_is_one_line(tmp_path, monkeypatch):
    def full(*_args, **_kwargs):
        raise tf.errors.ResourceExhaustedError(
            None, None, "tb_x/train/events.out.tfevents.1; No space left on device"
        )

    monkeypatch.setattr(tf.keras.callbacks.TensorBoard, "on_epoch_end", full)
    args = TrainArgs(
        model="MLP",
        epochs=1,
        toy_data=True,
        data_root=str(BUNDLED_TOY_ROOT),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
    )
    with pytest.raises(PipelineError, match="cannot write the training logs .*: disk full"):
        train(args)
    out = tmp_path / "out"
    assert not list(out.glob("model_*")) and not list(out.glob("run_*"))
    assert not _temporaries(out)


def test_write_failure_kinds():
    assert io_utils.write_failure_kind(OSError(errno.ENOSPC, "x")) == "disk full"
    assert io_utils.write_failure_kind(OSError(errno.EACCES, "x")) == "permission denied"
    oom = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
    assert io_utils.write_failure_kind(oom) is None  # memory, not the disk


# --- stale temporaries ------------------------------------------------------------------


@pytest.mark.slow
def test_stale_temporaries_of_dead_writers_are_removed_live_ones_kept(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    host = io_utils._host_tag()
    names = {
        "dead_file": f"run_a.jsonz.tmp-{int(dead.stdout)}-{host}-x1.jsonz",
        "dead_dir": f"model_a.tmp-{int(dead.stdout)}-{host}-x2",
        "mine": f"run_b.jsonz.tmp-{os.getpid()}-{host}-x3.jsonz",
        "parent_alive": f"run_c.jsonz.tmp-{os.getppid()}-{host}-x4.jsonz",
        "other_host_fresh": f"run_d.jsonz.tmp-{int(dead.stdout)}-00000000-x5.jsonz",
        "legacy_old": "results.csv.tmp-abcd1234.csv",
        "legacy_fresh": "results2.csv.tmp-efgh5678.csv",
    }
    for key, name in names.items():
        if key == "dead_dir":
            (tmp_path / name).mkdir()
            (tmp_path / name / "saved_model.pb").write_bytes(b"x")
        else:
            (tmp_path / name).write_text("x")
    (tmp_path / "keep.csv").write_text("x")
    two_days_ago = (tmp_path / "keep.csv").stat().st_mtime - 2 * 24 * 3600
    os.utime(tmp_path / names["legacy_old"], (two_days_ago, two_days_ago))
    lines: list[str] = []
    removed = io_utils.remove_stale_temporaries(tmp_path, lines.append)
    assert sorted(removed) == sorted([names["dead_file"], names["dead_dir"], names["legacy_old"]])
    assert len(lines) == 1 and "removed 3 stale temporaries" in lines[0]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(
        [
            "keep.csv",
            names["mine"],
            names["parent_alive"],
            names["other_host_fresh"],
            names["legacy_fresh"],
        ]
    )
    assert io_utils.remove_stale_temporaries(tmp_path, lines.append) == [] and len(lines) == 1


def test_configs_1_is_refused_with_a_reason(tmp_path):
    with pytest.raises(PipelineError, match="--configs: 1 gives no ranking signal"):
        TrainArgs(configs=1, out_dir=str(tmp_path)).validate()


def test_closed_stdout_pipe_ends_quietly():
    """`script | head`: the reader is gone before the script prints; no traceback, status 0."""
    script = Path(__file__).resolve().parents[1] / "echo_download_commands.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--collections", "all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # before the interpreter has even started importing
    _, stderr = proc.communicate(timeout=60)
    assert "Traceback" not in stderr.decode() and "BrokenPipe" not in stderr.decode()
    assert proc.returncode == 0
