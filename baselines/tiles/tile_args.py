"""tile:xla's training flags: `TrainArgs`, every tiles_train.py flag, checked without TensorFlow."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from baselines.core.args_record import TrainingArgs, check_training_flags, flag, parse_json_object
from baselines.core.data_roots import DataPlace
from baselines.core.errors import PipelineError
from baselines.core.io_utils import check_writable_dir

TEST_MODES = ("predictions", "metrics")
SAMPLINGS = ("uniform", "balanced", "sqrt_configs")
# Where echo_download_commands.py puts tile:xla; every entry script's default.
DEFAULT_DATA_ROOT = "~/data/tpugraphs/npz/tile/xla"
TILE_PLACE = DataPlace(
    default=DEFAULT_DATA_ROOT,
    toy=Path(__file__).resolve().parents[2] / "data" / "tile_xla_toy",
    holds="train/ valid/ test/ (e.g. ~/data/tpugraphs/npz/tile/xla)",
    unit="kernels",
)
BUNDLED_TOY_ROOT = TILE_PLACE.toy


@dataclasses.dataclass(frozen=True)
class TrainArgs(TrainingArgs):
    """Every tiles_train.py flag; `docs/usage.md`'s flag table is generated from these helps."""

    ADDED_LATER = frozenset({"average_from"})
    PLACE = TILE_PLACE  # where --data_root and --bundled_toy point

    model: str = flag("EarlyJoinSAGE", "model class: a class of baselines/tiles/models.py")
    epochs: int = flag(100, "maximum training epochs")
    early_stop: int = flag(20, "stop after this many epochs without a validation OPA gain")
    configs: int = flag(
        10,
        "configurations sampled per kernel in a training batch (at least 2; more than the "
        "largest train kernel has is capped to it)",
    )
    batch: int = flag(10, "kernels per training batch")
    losses: str = flag(
        "ListMLELoss:1,MSE:0.02",
        "weighted losses, Name:weight,... (ListMLELoss, PListMLELoss, PairwiseHingeLoss, MSE)",
    )
    clip_norm: float = flag(1e-3, "gradient clip norm (per variable, as Keras clipnorm)")
    model_kwargs_json: str = flag("{}", "JSON object of model constructor kwargs")
    test_mode: str = flag(
        "predictions",
        "predictions: write the results CSV; metrics: report test errors (labelled test data)",
    )
    out_dir: str = flag(
        "~/out/tpugraphs_tiles", "where the model, run file, TensorBoard logs and CSV go"
    )
    results_csv: str = flag("", "results CSV path (default: <out_dir>/results_<ms timestamp>.csv)")
    validate_batches: int = flag(-1, "validation batches per epoch for OPA (-1 = all)")
    run_id: str = flag("", "free-form label stored in the run (part of the hash)")
    data_root: str = flag(
        DEFAULT_DATA_ROOT,
        "folder with train/, valid/, test/ npz files (the bundled toy set stands in when "
        "this default is absent)",
    )
    cache_dir: str = flag(
        "~/data/tpugraphs/cache/tile",
        "cache of loaded splits, keyed by file names, sizes, mtimes and contents",
    )
    max_files: int | None = flag(
        None, "read only the first N files of each split, in file-name order (None = all)"
    )
    seed: int = flag(0, "random seed: same seed and data give the same run")
    # Beyond the baseline (its behaviour at this default):
    sampling: str = flag(
        "uniform",
        "uniform: every train kernel once per epoch; balanced: kernels drawn so that every "
        "program is seen equally often; sqrt_configs: kernels drawn in proportion to the "
        "square root of their config count",
    )
    # Upstream's default.
    eval_every: int = flag(
        5,
        "validate (OPA, model selection, early stop) every N epochs and after the last; "
        "--early_stop still counts epochs",
    )

    def __post_init__(self, toy_data: bool, bundled_toy: bool) -> None:
        super().__post_init__(toy_data, bundled_toy)
        self.parse_optional_ints("average_from")

    def model_kwargs(self) -> dict[str, Any]:
        return parse_json_object("model_kwargs_json", self.model_kwargs_json, '{"hidden_dim": 128}')

    def validate(self) -> None:
        """Checks everything that can be checked before loading data (`check_flags`, the model)."""
        self.check_flags()
        # Imported here so that importing TrainArgs stays free of TensorFlow.
        from baselines.tiles.model_builder import build_model

        build_model(self.model, self.configs, self.model_kwargs())

    def check_flags(self) -> None:
        """Checks every flag without TensorFlow (the model and its kwargs: `validate`)."""
        check_training_flags(self)
        if self.test_mode not in TEST_MODES:
            raise PipelineError(f"--test_mode: '{self.test_mode}' is not one of {TEST_MODES}")
        if self.sampling not in SAMPLINGS:
            raise PipelineError(
                f"--sampling: '{self.sampling}' is not one of {', '.join(SAMPLINGS)}"
            )
        check_writable_dir(Path(self.out_dir).expanduser(), "--out_dir")
        if self.results_csv and self.test_mode == "predictions":
            # Checked now, not after hours of training.
            check_writable_dir(Path(self.results_csv).expanduser().parent, "--results_csv")


# The K of the top-K errors a run reports: the keys of its record's final_error[split].
TOP_KS = ("1", "5", "10")
