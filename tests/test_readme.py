"""The README's step-by-step commands work as written, in order, on a fresh clone."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys

from conftest import ROOT

from baselines.tiles import data
from baselines.tiles.data_roots import BUNDLED_TOY_ROOT


def walkthrough_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- walkthrough:start -->\s*```bash\n(.*?)```", text, re.S)
    assert block, "README lost its walkthrough block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_walkthrough_runs_as_written(tmp_path):
    commands = walkthrough_commands()
    assert [c.split()[1] for c in commands] == [
        "tiles_train.py",
        "tiles_gen_predictions_csv.py",
        "create_kaggle_csv.py",
    ]
    # Same lines, with the output folder moved out of the repository.
    out = tmp_path / "walkthrough"
    script = "set -euo pipefail\n" + "\n".join(
        c.replace("out/walkthrough", str(out)) for c in commands
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "predictions_kaggle.csv", newline="") as f:
        rows = list(csv.reader(f))
    test = data.load_split(BUNDLED_TOY_ROOT / "test", progress=False)
    assert rows[0] == ["ID", "TopConfigs"]
    assert sorted(r[0] for r in rows[1:]) == sorted(f"tile:xla:{t}" for t in test.tile_ids)
