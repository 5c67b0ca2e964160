"""echo_download_commands.py prints mkdir, curl-unless-present and tar lines."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

import echo_download_commands as edc


@pytest.mark.slow
def test_default_prints_tile_lines():
    out = subprocess.run(
        [sys.executable, str(ROOT / "echo_download_commands.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0] == "mkdir -p ~/data/tpugraphs"
    tars = [f"npz_tile_xla_{s}.tar" for s in ("train", "valid", "test")]
    for name in tars:
        assert f"[ -f {name} ] || curl -fL -o {name} {edc.BASE_URL}/{name}" in out
        assert f"tar xf {name}" in out
    # Plus two comment lines (harmless when piped into bash): how to get the sample.
    assert len(out) == 2 + 2 * len(tars) + 2
    assert out[-1].startswith("# kaggle competitions download -c predict-ai-model-runtime")
    assert all(line.startswith("#") for line in out[-2:])
    assert all("layout" not in line for line in out)


def test_collections_and_dest():
    assert len(edc.tar_names("layout")) == 12 and len(edc.tar_names("all")) == 15
    lines = edc.download_commands("/tmp/my data", "tile")
    assert lines[0] == "mkdir -p '/tmp/my data'"
    curl = [line for line in lines if "curl" in line]
    assert len(curl) == 3 and all(line.startswith("[ -f npz_tile_xla_") for line in curl)
