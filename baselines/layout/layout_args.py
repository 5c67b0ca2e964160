"""The layout collections' training flags (`LayoutTrainArgs`: upstream `layout_train.py`'s, this
project's and `core.args_record.TrainingArgs`), checked without TensorFlow, and their data root."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from baselines.core.args_record import TrainingArgs, check_training_flags, flag, parse_json_object
from baselines.core.cli import did_you_mean
from baselines.core.data_roots import REPO_ROOT, DataPlace, training_root
from baselines.core.errors import PipelineError
from baselines.core.io_utils import check_output_file, check_writable_dir
from baselines.core.submission import LAYOUT_SEARCHES, LAYOUT_SOURCES
from baselines.layout.cache import prepare_cache_dir

# The bundled synthetic toy set (relative to the repository), every entry script's default.
DEFAULT_DATA_ROOT = "data/layout_toy"
LAYOUT_PLACE = DataPlace(
    default=DEFAULT_DATA_ROOT,
    toy=REPO_ROOT / DEFAULT_DATA_ROOT,
    holds="{xla,nlp}/{default,random}/{train,valid,test} (e.g. ~/data/tpugraphs/npz/layout)",
    unit="programs",
)
BUNDLED_TOY_ROOT = LAYOUT_PLACE.toy


@dataclasses.dataclass(frozen=True)
class LayoutTrainArgs(TrainingArgs):
    """Every layout_train.py flag."""

    NOT_HASHED = frozenset({"out_dir", "cache_dir", "results_csv", "final_validation"})
    ADDED_LATER = frozenset(
        {"average_from", "toy_data", "optimizer", "weight_decay", "lr_schedule"}
        | {"warmup_epochs", "max_train_steps", "eval_every", "validate_batches", "micro_batch"}
    )
    PLACE = LAYOUT_PLACE  # where --data_root and --bundled_toy point

    source: str = flag("xla", f"layout source: {', '.join(LAYOUT_SOURCES)}")
    search: str = flag("random", f"layout search: {', '.join(LAYOUT_SEARCHES)}")
    epochs: int = flag(50, "maximum training epochs")
    early_stop: int = flag(25, "stop after this many epochs without a validation OPA gain")
    configs: int = flag(16, "configurations sampled per graph per training step (at least 2)")
    max_configs: int | None = flag(
        None, "keep at most this many configurations per train/valid graph (None = all)"
    )
    batch: int = flag(8, "graphs per training batch")
    micro_batch: int = flag(
        0,
        "graphs per gradient pass: a batch runs as passes of at most this many graphs whose "
        "gradients are summed into its one update (the same update in less memory; 0 = one pass)",
    )
    clip_norm: float = flag(1e-2, "gradient clip norm")
    keep_nodes: int = flag(
        5000,
        "segment training: per graph and step, the gradient flows through one random "
        "segment of this many nodes (the forward pass sees the whole graph)",
    )
    model: str = flag("ResModel", "model class: a class of baselines/layout/models.py")
    model_kwargs_json: str = flag("{}", "JSON object of model constructor kwargs")
    losses: str = flag(
        "ListMLELoss:1",
        "weighted losses, Name:weight,... (ListMLELoss, PListMLELoss, PairwiseHingeLoss, MSE)",
    )
    seed: int = flag(0, "random seed: same seed and data give the same run (on CPU)")
    data_root: str = flag(
        DEFAULT_DATA_ROOT,
        "folder holding {xla,nlp}/{default,random}/{train,valid,test}, e.g. "
        "~/data/tpugraphs/npz/layout (default: the bundled synthetic TOY set)",
    )
    max_files: int | None = flag(
        None, "read only the first N files of each split, in file-name order (None = all)"
    )
    out_dir: str = flag(
        "~/out/tpugraphs_layout",
        "where model_<hash>/, run_<hash>.jsonz and the results CSV go (not hashed)",
    )
    results_csv: str = flag(
        "",
        "CSV of the test split's rankings, written after training (default: "
        "<out_dir>/results_<ms timestamp>_<source>_<search>.csv; None = no test ranking; "
        "not hashed)",
    )
    validate_batches: int = flag(
        10,
        "validation batches per epoch for OPA, Kendall tau and model selection (<= 0 = all); "
        "after training every validation configuration is scored",
    )
    final_validation: bool = flag(
        True,
        "after training, score every configuration of every validation graph into the run "
        "record (kaggle_submission.py passes False: its ranking step scores them; not hashed)",
    )
    cache_dir: str | None = flag(
        None,
        "folder for memory-mapped caches of the read splits, reused by later runs "
        "(None = no cache; not hashed)",
    )
    prune_hops: int | None = flag(
        1, "keep configurable nodes and their k-hop neighbourhood (None or -1 = no pruning)"
    )
    drop_duplicates: bool = flag(True, "drop repeated configurations of train/valid graphs")

    def __post_init__(self, toy_data: bool, bundled_toy: bool) -> None:
        super().__post_init__(toy_data, bundled_toy)
        self.parse_optional_ints("max_configs", "prune_hops", "average_from")
        if self.prune_hops == -1:  # no pruning
            object.__setattr__(self, "prune_hops", None)
        if isinstance(self.cache_dir, str) and self.cache_dir.strip().lower() in ("", "none"):
            object.__setattr__(self, "cache_dir", None)

    def split_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `run_data.load_run_split` (reductions of train/valid graphs)."""
        return dict(
            max_files=self.max_files,
            prune_hops=self.prune_hops,
            drop_duplicates=self.drop_duplicates,
            max_configs=self.max_configs,
            seed=self.seed,
            cache_dir=self.cache_dir,
        )

    @property
    def ranks_test(self) -> bool:
        """Whether layout_train.py ranks the test split after training (not with None)."""
        return self.results_csv.strip().lower() != "none"

    def model_kwargs(self) -> dict[str, Any]:
        return parse_json_object("model_kwargs_json", self.model_kwargs_json, '{"hidden_dim": 16}')

    def collection_dir(self, root: Path) -> Path:
        return root / self.source / self.search

    def check_flags(self) -> None:
        """Checks every value, one line per problem, without TensorFlow."""
        for name, allowed in (("source", LAYOUT_SOURCES), ("search", LAYOUT_SEARCHES)):
            value = getattr(self, name)
            if value not in allowed:
                raise PipelineError(
                    f"--{name}: {value!r} is not one of {', '.join(allowed)}"
                    f"{did_you_mean(value, list(allowed))}"
                )
        check_training_flags(self)
        if self.keep_nodes < 1:
            raise PipelineError(f"--keep_nodes: must be at least 1, got {self.keep_nodes}")
        if self.micro_batch < 0:
            raise PipelineError(
                f"--micro_batch: must be 0 (one pass) or positive, got {self.micro_batch}"
            )
        if self.max_configs is not None and self.max_configs < 2:
            raise PipelineError(
                f"--max_configs: must be at least 2 (or None = all), got {self.max_configs}"
            )
        if self.prune_hops is not None and self.prune_hops < 0:
            raise PipelineError(
                f"--prune_hops: must be >= 0, or None/-1 for no pruning, got {self.prune_hops}"
            )
        if self.seed < 0:
            raise PipelineError(f"--seed: must be >= 0, got {self.seed}")


def check_run(args: LayoutTrainArgs, log=None) -> tuple[Path, bool, Path]:
    """(data root, whether it is the toy set, output folder) of a run, checked (no TensorFlow)."""
    args.check_flags()
    root, toy, _ = training_root(LAYOUT_PLACE, args.data_root, log=lambda _: None)
    out = Path(args.out_dir).expanduser()
    check_writable_dir(out, "--out_dir")
    if args.results_csv and args.ranks_test:  # checked now, not after hours of training
        check_output_file(Path(args.results_csv), "--results_csv")
    prepare_cache_dir(args.cache_dir, log)
    return root, toy, out
