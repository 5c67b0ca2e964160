"""The tile:xla task: its training flags, how a sweep summarizes its runs, its evaluation table.

`TrainArgs`: every tiles_train.py flag. Defaults are the public baseline's, and
the flags the baseline lacks train exactly as it does at their defaults.
`TILE_SWEEPS`: the tile parts of `baselines/core/sweeps.py`. `error_table`:
top-K errors of saved models and of their ensemble, overall and per program
(the file-name prefixes before the trailing hash, "benchmarks" upstream).
Nothing here imports TensorFlow or Beam.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from baselines.core import sweeps as core
from baselines.core.args_record import ArgsRecord, check_training_flags, flag, parse_json_object
from baselines.core.data_roots import DataPlace
from baselines.core.errors import PipelineError
from baselines.core.io_utils import check_writable_dir
from baselines.core.rank_run import Evaluation, RankingHooks, Scored, timed
from baselines.core.submission import TILE_PREFIX
from baselines.core.sweeps import Sweep
from baselines.core.tables import cell, csv_table, markdown_table
from baselines.core.task import Loaded, Task
from baselines.tiles.data import TileSplit

TEST_MODES = ("predictions", "metrics")
OPTIMIZERS = ("adam", "adamw")
LR_SCHEDULES = ("constant", "cosine")
SAMPLINGS = ("uniform", "balanced", "sqrt_configs")
# Where echo_download_commands.py puts tile:xla; every entry script's default.
DEFAULT_DATA_ROOT = "~/data/tpugraphs/npz/tile/xla"


@dataclasses.dataclass(frozen=True)
class TrainArgs(ArgsRecord):
    """Every tiles_train.py flag; `docs/usage.md`'s flag table is generated from these helps."""

    HASHED_WHEN_SET = frozenset({"average_from"})

    model: str = flag("EarlyJoinSAGE", "model class: a class of baselines/tiles/models.py")
    epochs: int = flag(100, "maximum training epochs")
    max_train_steps: int = flag(
        0,
        "cap on training steps: a run trains min(--epochs, ceil(this / steps per epoch)) "
        "epochs, its learning-rate schedule fitted to them (0 = no cap)",
    )
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
    lr: float = flag(1e-3, "learning rate (peak rate with --lr_schedule=cosine)")
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
    toy_data: bool = flag(False, "use the first 100 files of each split")
    seed: int = flag(0, "random seed: same seed and data give the same run")
    # Beyond the baseline (its behaviour at these defaults):
    optimizer: str = flag("adam", "adam (the baseline) or adamw (decoupled weight decay)")
    weight_decay: float = flag(0.0, "AdamW weight decay (needs --optimizer=adamw)")
    lr_schedule: str = flag(
        "constant", "constant (the baseline) or cosine (Keras CosineDecay over all steps)"
    )
    warmup_epochs: int = flag(0, "epochs of linear warm-up before the cosine decay")
    sampling: str = flag(
        "uniform",
        "uniform: every train kernel once per epoch; balanced: kernels drawn so that every "
        "program is seen equally often; sqrt_configs: kernels drawn in proportion to the "
        "square root of their config count",
    )
    average_from: int | None = flag(
        None,
        "end on the mean of the weights after this epoch (counted from 1) and every later "
        "one, instead of the best epoch's (None = the best epoch's)",
    )
    # Upstream's flag and default.
    eval_every: int = flag(
        5,
        "validate (OPA, model selection, early stop) every N epochs and after the last; "
        "--early_stop still counts epochs",
    )

    def __post_init__(self) -> None:
        self.parse_optional_ints("average_from")

    def model_kwargs(self) -> dict[str, Any]:
        return parse_json_object("model_kwargs_json", self.model_kwargs_json, '{"hidden_dim": 128}')

    def validation_epochs(self) -> list[int]:
        """1-based epochs after which validation runs: every `eval_every`-th and the last."""
        return sorted({*range(self.eval_every, self.epochs + 1, self.eval_every), self.epochs})

    def validate(self) -> None:
        """Checks everything that can be checked before loading data.

        `check_flags`, then builds the model once, so that the kwargs' values
        are checked by its constructor.
        """
        self.check_flags()
        # Imported here so that importing TrainArgs stays free of TensorFlow.
        from baselines.tiles.model_builder import build_model

        build_model(self.model, self.configs, self.model_kwargs())

    def check_flags(self) -> None:
        """Checks every flag without TensorFlow (the model and its kwargs: `validate`)."""
        check_training_flags(self)
        if self.test_mode not in TEST_MODES:
            raise PipelineError(f"--test_mode: '{self.test_mode}' is not one of {TEST_MODES}")
        if self.eval_every < 1:
            raise PipelineError(f"--eval_every: must be at least 1, got {self.eval_every}")
        for name, allowed in (
            ("optimizer", OPTIMIZERS),
            ("lr_schedule", LR_SCHEDULES),
            ("sampling", SAMPLINGS),
        ):
            if getattr(self, name) not in allowed:
                raise PipelineError(
                    f"--{name}: '{getattr(self, name)}' is not one of {', '.join(allowed)}"
                )
        if self.weight_decay < 0 or (self.weight_decay > 0 and self.optimizer != "adamw"):
            raise PipelineError(
                f"--weight_decay: {self.weight_decay} needs --optimizer=adamw and a value >= 0"
            )
        if self.warmup_epochs < 0 or (self.warmup_epochs and self.lr_schedule != "cosine"):
            raise PipelineError(
                f"--warmup_epochs: {self.warmup_epochs} needs --lr_schedule=cosine and a value >= 0"
            )
        if self.max_train_steps < 0:
            raise PipelineError(
                f"--max_train_steps: must be 0 (no cap) or positive, got {self.max_train_steps}"
            )
        check_writable_dir(Path(self.out_dir).expanduser(), "--out_dir")
        if self.results_csv and self.test_mode == "predictions":
            # Checked now, not after hours of training.
            check_writable_dir(Path(self.results_csv).expanduser().parent, "--results_csv")


TOP_KS = ("1", "5", "10")  # keys of a run record's final_error["val"]


def program_balanced_weights(split: TileSplit) -> np.ndarray:
    """Per-kernel sampling probabilities that give every program the same share."""
    from baselines.core.metrics import program_of

    programs = [program_of(str(t)) for t in split.tile_ids]
    _, program_index, counts = np.unique(programs, return_inverse=True, return_counts=True)
    weights = 1.0 / counts[program_index]
    return weights / weights.sum()


def config_count_weights(split: TileSplit) -> np.ndarray:
    """Per-kernel sampling probabilities proportional to the square root of its configs.

    A step sees `--configs` of a kernel's configurations, so under uniform
    sampling a kernel of 3000 is seen as often as one of 100 and most of its
    configurations are rarely compared. Proportional to the count, every
    configuration would be seen alike, but small kernels, which count as much
    in the top-K error, would be drawn 30 times less; the square root is
    between the two.
    """
    weights = np.sqrt(split.num_configs.astype(np.float64))
    return weights / weights.sum()


def sampling_weights(args: TrainArgs, split: TileSplit) -> np.ndarray | None:
    """`--sampling`'s per-kernel probabilities (None: every kernel once per epoch)."""
    if args.sampling == "balanced":
        return program_balanced_weights(split)
    if args.sampling == "sqrt_configs":
        return config_count_weights(split)
    return None


TILE_PLACE = DataPlace(
    default=DEFAULT_DATA_ROOT,
    toy=Path(__file__).resolve().parents[2] / "data" / "tile_xla_toy",
    holds="train/ valid/ test/ (e.g. ~/data/tpugraphs/npz/tile/xla)",
    unit="kernels",
)


def read_split(folder: Path, cache_dir: str | None, stats_dict: dict | None, estimates: bool):
    """A split as its files hold it, or normalized with the statistics `stats_dict`.

    Module-level, so that another process can read the split while this one
    imports TensorFlow and rebuilds the models.
    """
    from baselines.tiles.data import load_split
    from baselines.tiles.features import FeatureStats

    raw = load_split(folder, name=folder.name, cache_dir=cache_dir)
    if stats_dict is None:
        return raw
    return FeatureStats.from_dict(stats_dict).normalize_split(raw, estimates=estimates)


class TileRanking(RankingHooks):
    """tile:xla for the ranking driver (`core/rank_run.py`): kernels, scored by `SavedRanker`.

    The split is read in another process while this one imports TensorFlow,
    rebuilds the models and traces their scoring functions (all of which hold
    the GIL most of the time); with one model the split is also normalized there.
    """

    place, unit = TILE_PLACE, "kernel"

    def read_runs(self, text: str, flag: str):
        from baselines.tiles.run_records import read_model_list

        return read_model_list(text, flag)

    def folder(self, root: Path, record: dict, split: str) -> Path:
        return root / split

    def prepare(self, request, output: Path, log) -> None:
        # Leftovers of killed runs: in the output's folder only those whose writer is
        # known to be gone, in the cache also old foreign ones.
        from baselines.core.io_utils import remove_stale_temporaries

        if output.parent.is_dir():
            remove_stale_temporaries(output.parent, max_age_s=None)
        if request.cache_dir:
            remove_stale_temporaries(Path(request.cache_dir))

    def score(self, models, folder: Path, request, log) -> Scored:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from baselines.tiles.features import uses_estimates

        records = [record for _, record in models]
        stats = records[0]["feature_stats"] if len(models) == 1 else None
        estimates = uses_estimates(records[0]["model_kwargs"])
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            loading = pool.submit(read_split, folder, request.cache_dir, stats, estimates)
            from baselines.tiles.predict import SavedRanker

            rankers = [SavedRanker.load(d, record) for d, record in models]
            for ranker in rankers:
                ranker.scorer.warm_up()
            split = loading.result()
        if stats is not None:  # normalized while it was read
            members, seconds = timed(lambda: [rankers[0].scorer.score_split(split)])
        else:
            members, seconds = timed(lambda: [ranker.score(split) for ranker in rankers])
        return Scored(folder, list(split.tile_ids), members, split, seconds)

    def row_id(self, record: dict, item: str) -> str:
        return f"{TILE_PREFIX}{item}"

    figure_name = "Kaggle score (2 - top-5 best / best runtime)"

    def item_figures(self, scored: Scored, scores: list) -> list[float]:
        """Each kernel's Kaggle score: 1 - its top-5 error, as in the error table."""
        from baselines.core.metrics import top_k_error

        runtimes = scored.data.normalized_runtimes()
        return [1.0 - top_k_error(s, r, 5) for s, r in zip(scores, runtimes, strict=True)]

    def labelled_summary(self, scored: Scored, scores: list, label: str) -> str:
        split = scored.data
        return markdown(error_table(split, {label: scores})) if split.has_labels else ""

    def evaluate(self, scored: Scored, scores: dict[str, list], plan) -> Evaluation:
        from baselines.core import plots

        rows = error_table(scored.data, scores)
        shown = "ensemble" if "ensemble" in scores else next(iter(scores))
        runtimes = scored.data.normalized_runtimes()
        figures = {
            "_per_program.png": plots.per_program_errors(rows),
            "_pred_vs_true.png": plots.predicted_vs_true(scores[shown], runtimes, shown),
        }
        return Evaluation(markdown(rows), {".csv": csv_text(rows)}, figures)


class TileTask(Task):
    """tile:xla for the conductor (`core/conductor.py`): kernels ranked by top-K error.

    Splits are normalized with statistics fitted on train only, and a run is
    named with its data's identity when its files hold another data set's run.
    The final evaluation scores every configuration of every validation and
    test kernel: test errors with `--test_mode=metrics` (labelled test data),
    else the results CSV of the test kernels' top 5.
    """

    collection, unit = "tile", "kernel"
    not_hparams = ("out_dir", "cache_dir", "results_csv")
    hparams_metrics = (
        ("epoch_top5_err", "validation", "val top-5 error (sampled configs)"),
        ("epoch_top1_err", "validation", "val top-1 error (sampled configs)"),
        ("epoch_top10_err", "validation", "val top-10 error (sampled configs)"),
        ("epoch_opa", "validation", "val OPA"),
        ("epoch_loss", "validation", "val loss"),
        ("epoch_loss", "train", "train loss"),
    )

    def check(self, args: TrainArgs, log) -> None:
        args.validate()

    def load(self, args: TrainArgs, progress: bool, log) -> Loaded:
        """The three splits, normalized with the train split's feature statistics."""
        from baselines.tiles.data import OPCODE_VOCAB_SIZE, data_identity, load_splits
        from baselines.tiles.data_roots import resolve_data_root, toy_data_banner
        from baselines.tiles.features import FeatureStats, uses_estimates

        splits = ("train", "valid", "test")
        root, toy_fallback = resolve_data_root(args.data_root, DEFAULT_DATA_ROOT, log)
        raw = load_splits(
            root,
            splits,
            toy_data=args.toy_data,
            cache_dir=args.cache_dir,
            progress=progress,
            log=log,
        )
        source = data_identity(root, splits, args.toy_data, toy_fallback)
        stats = FeatureStats.fit_split(raw["train"])
        estimates = uses_estimates(args.model_kwargs())
        data = {name: stats.normalize_split(split, estimates) for name, split in raw.items()}
        log(f"data: {root} ({', '.join(f'{len(data[s])} {s}' for s in splits)} kernels)")
        return Loaded(
            *(data[s] for s in splits),
            facts={
                "opcode_vocab_size": OPCODE_VOCAB_SIZE,
                "feature_stats": stats.to_dict(),
                "data_root": str(root),
                "data": source,
            },
            identity=source["identity"],
            toy_fallback=toy_fallback,
            notice=toy_data_banner(f"{args.data_root} does not exist") if toy_fallback else None,
        )

    def most_configs(self, loaded: Loaded) -> int:
        return int(loaded.train.num_configs.max())

    def batches(self, args: TrainArgs, loaded: Loaded, configs: int, replicas: int):
        """Train batches drawn by `--sampling`; validation batches of one fixed sample."""
        from baselines.core.keras_fit import EpochBatches
        from baselines.tiles.graph import batch_source

        train = EpochBatches(
            batch_source(loaded.train),
            args.batch,
            configs,
            args.seed,
            weights=sampling_weights(args, loaded.train),
            num_replicas=replicas,
        )
        valid = EpochBatches(
            batch_source(loaded.valid),
            args.batch,
            configs,
            args.seed + 1,
            fixed_epoch=0,
            max_steps=args.validate_batches,
            num_replicas=replicas,
        )
        return train, valid

    def schedule(self, args: TrainArgs, steps_per_epoch: int, log) -> tuple[int, list[int]]:
        """`--epochs` as `--max_train_steps` caps them; validation every `--eval_every`."""
        from baselines.core.conductor import effective_epochs

        epochs = effective_epochs(args.epochs, args.max_train_steps, steps_per_epoch, log)
        return epochs, dataclasses.replace(args, epochs=epochs).validation_epochs()

    def optimizer(self, args: TrainArgs, epochs: int, steps_per_epoch: int):
        """Adam or AdamW, at a constant rate or along `--lr_schedule`."""
        from baselines.core.conductor import learning_rate, make_optimizer

        rate = learning_rate(args.lr, args.lr_schedule, epochs, steps_per_epoch, args.warmup_epochs)
        decay = args.weight_decay if args.optimizer == "adamw" else None
        return make_optimizer(rate, args.clip_norm, decay)

    def build_model(self, args: TrainArgs, configs: int):
        from baselines.tiles.model_builder import build_model, create_variables

        model = build_model(args.model, configs, args.model_kwargs())
        create_variables(model)
        return model

    def to_model_inputs(self, batch):
        from baselines.tiles.graph import graph_from_batch

        return graph_from_batch(batch)

    def run_label(self, args: TrainArgs, run_hash: str) -> str:
        """Model, --run_id when given, and the run hash's first 8 digits."""
        return "-".join(p for p in (args.model, args.run_id, run_hash[:8]) if p)

    def evaluate(self, args: TrainArgs, model, loaded: Loaded, record, progress: bool, log):
        """Top-K errors of the validation (and labelled test) kernels, over all their configs.

        Returns the record's fields and the test scores. Test predictions only
        with `--test_mode=predictions` (NaN or infinite scores refused).
        """
        from baselines.core import metrics
        from baselines.tiles.predict import ConfigScorer

        scorer = ConfigScorer(model)
        timings, summaries, scores = {}, {}, {}
        for name, split in (("val", loaded.valid), ("test", loaded.test)):
            clock = time.perf_counter()
            scores[name] = scorer.score_split(split, progress=progress)
            timings[f"{name}_eval_s"] = time.perf_counter() - clock
            if split.has_labels:
                runtimes = split.normalized_runtimes()
                summaries[name] = metrics.summarize(list(split.tile_ids), scores[name], runtimes)
        final_error = {"val": {k: summaries["val"][k] for k in TOP_KS}}
        test_predictions = {}
        if args.test_mode == "metrics":
            if "test" not in summaries:
                log("note: the test split has no runtimes (hidden labels); no test errors")
            else:
                final_error["test"] = {k: summaries["test"][k] for k in TOP_KS}
        else:
            tile_ids = loaded.test.tile_ids
            metrics.require_finite_scores(tile_ids, scores["test"], "test kernels")
            test_predictions = {
                str(t): metrics.top_configs(s, 5) for t, s in zip(tile_ids, scores["test"])
            }
        log("val top-1/5/10 error: " + " / ".join(f"{final_error['val'][k]:.4f}" for k in TOP_KS))
        fields = {
            "final_error": final_error,
            "val_summary": summaries["val"],
            "test_predictions": test_predictions,
            "timings": timings,
            "traces": {"predict": scorer.traces},
        }
        return fields, scores["test"]

    def finish(self, args: TrainArgs, record: dict, outputs, loaded: Loaded, log) -> None:
        """With `--test_mode=predictions`, the results CSV (its path goes into `record`)."""
        if args.test_mode != "predictions":
            return
        from baselines.core.submission import HEADER, write_csv_atomic
        from baselines.tiles.predict import ranking_rows

        csv_path = Path(
            args.results_csv
            or Path(args.out_dir).expanduser() / f"results_{int(time.time() * 1000)}.csv"
        )
        write_csv_atomic(csv_path.expanduser(), HEADER, ranking_rows(loaded.test.tile_ids, outputs))
        record["results_csv"] = str(csv_path)
        log(f"wrote {csv_path} ({len(loaded.test)} test kernels)")


def train(args: TrainArgs, *, progress: bool = True, log=print, strategy=None) -> dict[str, Any]:
    """Trains, evaluates and saves one tile run (`core.conductor.train_run`); its record.

    record = train(TrainArgs(model="MLP", toy_data=True, epochs=5))
    record["final_error"]["val"]     # {"1": ..., "5": ..., "10": ...}
    """
    from baselines.core.conductor import train_run

    return train_run(TileTask(), args, strategy=strategy, progress=progress, log=log)


# The paper's hyperparameter grid (TpuGraphs paper, Table 5), as the
# upstream sweep `tiles_beam_experiments.py` spells it, in upstream's loop
# order. Model kwargs keep upstream's names (see model_builder.UPSTREAM).
PAPER_BASE_FLAGS: dict[str, Any] = {
    "out_dir": "~/out/tpugraphs_tiles/beam",
    "test_mode": "metrics",
    "validate_batches": 50,
    "early_stop": 10,
    "epochs": 500,
    "configs": 8,
    "batch": 10,
    "eval_every": 2,
}
PAPER_MODEL_GRID: tuple[tuple[str, dict[str, Any]], ...] = (
    ("MLP", {"op_embed_dim": 64, "hidden_dim": 64, "mlp_layers": 2}),
    ("MLP", {"op_embed_dim": 128, "hidden_dim": 128, "mlp_layers": 2}),
    ("MLP", {"op_embed_dim": 128, "hidden_dim": 128, "mlp_layers": 3}),
    ("MLP", {"op_embed_dim": 256, "hidden_dim": 128, "mlp_layers": 3}),
    ("EarlyJoinSAGE", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinSAGE", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinSAGE", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("EarlyJoinSAGE", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
    ("LateJoinSAGE", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinSAGE", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinSAGE", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("LateJoinSAGE", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
    ("EarlyJoinResGCN", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinResGCN", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinResGCN", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("EarlyJoinResGCN", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
    ("LateJoinResGCN", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinResGCN", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinResGCN", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("LateJoinResGCN", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
)
PAPER_TRAINING_AXES: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("losses", ("ListMLELoss:1,MSE:0.02", "MSE:1", "ListMLELoss:1")),
    ("run_id", ("0", "1", "2")),
    ("clip_norm", (1e-3, 100.0)),
    ("lr", (1e-2, 1e-3)),
)


def paper_sweep() -> Sweep:
    """The paper's grid: PAPER_MODEL_GRID x PAPER_TRAINING_AXES on PAPER_BASE_FLAGS."""
    names = [name for name, _ in PAPER_TRAINING_AXES]
    entries = [
        {"model": model, "model_kwargs_json": json.dumps(kwargs), **dict(zip(names, values))}
        for model, kwargs in PAPER_MODEL_GRID
        for values in itertools.product(*(values for _, values in PAPER_TRAINING_AXES))
    ]
    return Sweep("paper", dict(PAPER_BASE_FLAGS), tuple(entries))


def summarize(record: Mapping[str, Any]) -> dict[str, Any]:
    """A tile run record's summary fields: validation top-K errors, best validated OPA, epochs."""
    # None marks epochs without validation (--eval_every > 1).
    val_opa = [v for v in record.get("train_curve", {}).get("val_opa", []) if v is not None]
    val_opa = val_opa or [math.nan]
    return dict(
        val_error={k: float(record["final_error"]["val"][k]) for k in TOP_KS},
        val_opa=float(max(val_opa)),
        best_epoch=int(record.get("best_epoch", -1)),
        epochs_run=len(record.get("train_curve", {}).get("epoch", [])),
    )


def metric_cells(result: Mapping[str, Any]) -> list[float]:
    """The summary's metric cells: top-1/5/10 validation error, then val OPA."""
    return [*(result["val_error"][k] for k in TOP_KS), result["val_opa"]]


def sort_key(result: Mapping[str, Any]) -> tuple:
    """Best first: validation top-5 error, then top-1, top-10 (NaN last), then the hash."""
    errors = [result["val_error"][k] for k in ("5", "1", "10")]
    return (*((math.isnan(e), e) for e in errors), result["run_hash"])


def done_line(result: Mapping[str, Any]) -> str:
    """The log line's end for a trained run: "val top-1/5/10 error 0.5000 / 0.2500 / 0.1250"."""
    return "val top-1/5/10 error " + " / ".join(f"{result['val_error'][k]:.4f}" for k in TOP_KS)


TILE_SWEEPS = core.SweepKind(
    name="tile",
    args_type=TrainArgs,
    train_script="tiles_train.py",
    train_function="baselines.tiles.task:train",
    predict_script="tiles_gen_predictions_csv.py",
    metric_columns=("val_top1_err", "val_top5_err", "val_top10_err", "val_opa"),
    metric_cells=metric_cells,
    summarize=summarize,
    sort_key=sort_key,
    ranking="validation top-5 error",
    done_line=done_line,
    named_sweeps={"paper": paper_sweep},
    named_help="paper (the paper's grid), ",
    default_sweep="paper",
    sweep_example='[{"model": "MLP"}, {"model": "EarlyJoinSAGE", "lr": 0.01}]',
)


COLUMNS = (
    "model",
    "program",
    "kernels",
    "top1_err",
    "top5_err",
    "top10_err",
    "kaggle_score",
    "opa",
)


def error_table(
    split: TileSplit, scores_by_model: Mapping[str, Sequence[np.ndarray]]
) -> list[dict]:
    """Rows of COLUMNS: per model, "ALL" first, then each program by name."""
    from baselines.core import metrics  # TensorFlow: imported when a table is made

    if not split.has_labels:
        raise PipelineError(
            f"split {split.name} has no runtimes (hidden labels); evaluate on valid instead"
        )
    ids = [str(t) for t in split.tile_ids]
    runtimes = split.normalized_runtimes()
    rows = []
    for label, scores in scores_by_model.items():
        groups = [("ALL", metrics.summarize(ids, scores, runtimes))]
        groups += list(metrics.summarize_by_program(ids, scores, runtimes).items())
        for program, m in groups:
            rows.append(
                {
                    "model": label,
                    "program": program,
                    "kernels": int(m["kernels"]),
                    "top1_err": m["1"],
                    "top5_err": m["5"],
                    "top10_err": m["10"],
                    "kaggle_score": m["kaggle_score"],
                    "opa": m["opa"],
                }
            )
    return rows


def markdown(rows: Sequence[dict]) -> str:
    return markdown_table(COLUMNS, [[cell(r[c]) for c in COLUMNS] for r in rows])


def csv_text(rows: Sequence[dict]) -> str:
    """Every row, COLUMNS in order, floats to 4 decimals (as in the markdown)."""
    return csv_table(COLUMNS, [[cell(r[c]) for c in COLUMNS] for r in rows])
