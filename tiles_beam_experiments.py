#!/usr/bin/env python3
"""Trains a sweep of tile models as an Apache Beam pipeline, one run per element.

    python tiles_beam_experiments.py --sweep=paper --debug      # the first 2 runs of the grid
    python tiles_beam_experiments.py --sweep=seeds --num_seeds=3 --flagfile=configs/baseline.flags
    python tiles_beam_experiments.py --sweep=my_sweep.json --epochs=3 --out_dir=out/sweep
    python tiles_beam_experiments.py --sweep=paper --runner=FlinkRunner --flink_master=host:8081

Every `tiles_train.py` flag given here (`--flagfile` included) overrides that
flag in every run; other flags go to Apache Beam (without `--runner`, the local
runner with two worker processes). Each run trains as `tiles_train.py` would; a
failed run is reported and the sweep goes on. `sweep_summary.csv` and `.md` in
`--out_dir` list the runs by validation top-5 error, the failures, and the
command that ensembles the best `--ensemble_top` runs. Exit status 1 if a run
failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.errors import run_cli
from baselines.jobs import beam
from baselines.jobs.tile_spec import TILE_XLA


def build_parser() -> argparse.ArgumentParser:
    """tiles_train.py's flags (one per TrainArgs field; only given ones override), the sweep's."""
    return beam.build_parser(TILE_XLA, __doc__)


def plan(argv: list[str]) -> beam.Plan:
    """Parses and checks the command line (no Beam, no TensorFlow yet):
    plan(["--sweep=seeds", "--num_seeds=3", "--epochs=1"]).runs   # three TrainArgs
    """
    return beam.plan(TILE_XLA, argv, __doc__)


def main(argv: list[str] | None = None) -> int:
    """Runs the sweep on Beam and prints its summary; 1 if a run failed."""
    return beam.main(TILE_XLA, sys.argv[1:] if argv is None else argv, __doc__)


if __name__ == "__main__":
    run_cli(main)
