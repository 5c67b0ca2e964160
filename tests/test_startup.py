"""Entry-script start-up: TensorFlow imports without pulling in setuptools."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from baselines.core.startup import prepare_tensorflow_import, tile_thread_pools

THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")

ROOT = Path(__file__).resolve().parents[1]
PROBE = (
    "import sys; sys.path.insert(0, {root!r})\n"
    "from baselines.core.startup import prepare_tensorflow_import\n"
    "{call}\n"
    "import tensorflow\n"
    "print(sorted(m for m in ('setuptools', 'pkg_resources') if m in sys.modules))\n"
)


def imported_after_tensorflow(call: str) -> str:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("SETUPTOOLS_USE_DISTUTILS", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(root=str(ROOT), call=call)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("_distutils_hack") is None,
    reason="setuptools' distutils shim is not installed here, nothing to skip",
)
def test_prepare_skips_the_setuptools_distutils_shim():
    assert imported_after_tensorflow("pass") != "[]"  # the shim's cost, without the fix
    assert imported_after_tensorflow("prepare_tensorflow_import()") == "[]"


@pytest.mark.slow
@pytest.mark.parametrize(
    "flag, message",
    [
        ("--losses=ListMLE:1", "--losses: cannot parse"),
        ("--eval_every=0", "--eval_every: must be at least 1"),
        ("--data_root=/no/such/tpugraphs", "--data_root: /no/such/tpugraphs does not exist"),
    ],
)
def test_bad_flags_are_refused_without_importing_tensorflow(tmp_path, flag, message):
    # A TensorFlow that cannot be imported: refusing must not need it.
    code = (
        "import runpy, sys; sys.modules['tensorflow'] = None; "
        f"sys.argv = ['tiles_train.py', '--model=MLP', '--out_dir={tmp_path / 'o'}', {flag!r}]; "
        f"runpy.run_path({str(ROOT / 'tiles_train.py')!r}, run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


@pytest.mark.parametrize(
    "cores, expected",
    [
        (1, {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "2"}),
        (2, {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "2"}),
        (3, {}),
        (16, {}),
    ],
)
def test_tile_thread_pools_are_sized_only_on_small_machines(monkeypatch, cores, expected):
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    prepare_tensorflow_import(tile_thread_pools(cores))
    assert {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ} == expected


def test_without_thread_pools_tensorflow_chooses(monkeypatch):
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    prepare_tensorflow_import()  # what the layout scripts run
    assert not [name for name in THREAD_VARIABLES if name in os.environ]


def test_thread_pools_set_by_the_user_are_kept(monkeypatch):
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "2")
    monkeypatch.delenv("TF_NUM_INTEROP_THREADS", raising=False)
    prepare_tensorflow_import(tile_thread_pools(2))
    assert os.environ["TF_NUM_INTRAOP_THREADS"] == "2"
    assert os.environ["TF_NUM_INTEROP_THREADS"] == "2"
