#!/usr/bin/env python3
"""Trains a sweep of layout models as an Apache Beam pipeline, one run per element.

    python layout_beam_experiments.py --sweep=seeds --num_seeds=3 \
        --flagfile=configs/layout/baseline.flags --out_dir=out/layout_seeds
    python layout_beam_experiments.py --sweep=my_sweep.json --epochs=3 --out_dir=out/layout_sweep

The twin of `tiles_beam_experiments.py` for `layout_train.py`: every
`layout_train.py` flag given here (`--flagfile` included) overrides that flag in
every run; other flags go to Apache Beam (locally two worker processes). Each
run trains as `layout_train.py` would; a failed run is reported and the sweep
goes on. `sweep_summary.csv` and `.md` in `--out_dir` list the runs by
validation Kendall's tau, the failures, and the `layout_gen_predictions_csv.py`
command that ensembles the best `--ensemble_top` runs of the best run's
collection. Exit status 1 if a run failed.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.errors import run_cli
from baselines.jobs import beam
from baselines.jobs.layout_spec import ANY_LAYOUT

# layout_train.py's flags and the sweep's (`build_parser()`), the command line checked without
# Beam or TensorFlow (`plan(argv).runs`: the LayoutTrainArgs), the sweep run on Beam (`main()`).
build_parser = functools.partial(beam.build_parser, ANY_LAYOUT, __doc__)
plan = functools.partial(beam.plan, ANY_LAYOUT, __doc__)
main = functools.partial(beam.main, ANY_LAYOUT, __doc__)

if __name__ == "__main__":
    run_cli(main)
