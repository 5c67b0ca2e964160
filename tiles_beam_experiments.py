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

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.errors import run_cli
from baselines.jobs import beam
from baselines.jobs.tile_spec import TILE_XLA

# tiles_train.py's flags and the sweep's (`build_parser()`), the command line checked without
# Beam or TensorFlow (`plan(argv).runs`: the TrainArgs), the sweep run on Beam (`main()`).
build_parser = functools.partial(beam.build_parser, TILE_XLA, __doc__)
plan = functools.partial(beam.plan, TILE_XLA, __doc__)
main = functools.partial(beam.main, TILE_XLA, __doc__)

if __name__ == "__main__":
    run_cli(main)
