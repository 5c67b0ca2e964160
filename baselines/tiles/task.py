"""The tile:xla task: the conductor's hooks (`TileTask`) and `train`, one run through them.
Its flags are `tile_args.TrainArgs`; no TensorFlow at import time."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from baselines.core.data_roots import data_identity, toy_banner, training_root
from baselines.core.io_utils import remove_stale_temporaries
from baselines.core.rank_run import Evaluation, RankingHooks, Scored, timed
from baselines.core.submission import HEADER, TILE_PREFIX, write_csv_atomic
from baselines.core.task import Loaded, Task
from baselines.tiles.data import (
    FINGERPRINT_SALT,
    OPCODE_VOCAB_SIZE,
    TileSplit,
    load_split,
    load_splits,
)
from baselines.tiles.features import FeatureStats, uses_architecture, uses_estimates
from baselines.tiles.run_records import read_model_list
from baselines.tiles.tile_args import TILE_PLACE, TOP_KS, TrainArgs


def program_balanced_weights(split: TileSplit) -> np.ndarray:
    """Per-kernel sampling probabilities that give every program the same share."""
    from baselines.core.metrics import program_of

    programs = [program_of(str(t)) for t in split.tile_ids]
    _, program_index, counts = np.unique(programs, return_inverse=True, return_counts=True)
    weights = 1.0 / counts[program_index]
    return weights / weights.sum()


def sampling_weights(args: TrainArgs, split: TileSplit) -> np.ndarray | None:
    """`--sampling`'s per-kernel probabilities (None: every kernel once per epoch); with
    sqrt_configs, proportional to the square root of a kernel's configurations."""
    if args.sampling == "balanced":
        return program_balanced_weights(split)
    if args.sampling == "sqrt_configs":
        weights = np.sqrt(split.num_configs.astype(np.float64))
        return weights / weights.sum()
    return None


def read_split(
    folder: Path,
    cache_dir: str | None,
    stats_dict: dict | None,
    estimates: bool,
    max_files: int | None = None,
    architecture: bool = False,
):
    """A split as its files hold it (the first `max_files`), or normalized with `stats_dict`
    (with the analytic and architecture columns as asked)."""
    raw = load_split(folder, name=folder.name, cache_dir=cache_dir, max_files=max_files)
    if stats_dict is None:
        return raw
    stats = FeatureStats.from_dict(stats_dict)
    return stats.normalize_split(raw, estimates=estimates, architecture=architecture)


class TileRanking(RankingHooks):
    """tile:xla for the ranking driver (`core/rank_run.py`): kernels, scored by `SavedRanker`."""

    place, unit = TILE_PLACE, "kernel"

    def read_runs(self, text: str, flag: str):
        return read_model_list(text, flag)

    def folder(self, root: Path, record: dict, split: str) -> Path:
        return root / split

    def prepare(self, request, output: Path, log) -> None:
        # Leftovers of killed runs (in the output's folder only those known to be gone).
        if output.parent.is_dir():
            remove_stale_temporaries(output.parent, max_age_s=None)
        if request.cache_dir:
            remove_stale_temporaries(Path(request.cache_dir))

    def score(self, models, folder: Path, request, log) -> Scored:
        records = [record for _, record in models]
        stats = records[0]["feature_stats"] if len(models) == 1 else None
        estimates = uses_estimates(records[0]["model_kwargs"])
        architecture = uses_architecture(records[0]["model_kwargs"])
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            loading = pool.submit(
                read_split,
                folder,
                request.cache_dir,
                stats,
                estimates,
                request.max_files,
                architecture,
            )
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
        from baselines.tiles.error_table import error_table, markdown

        split = scored.data
        return markdown(error_table(split, {label: scores})) if split.has_labels else ""

    def evaluate(self, scored: Scored, scores: dict[str, list], plan) -> Evaluation:
        from baselines.core import plots
        from baselines.tiles.error_table import csv_text, error_table, markdown

        rows = error_table(scored.data, scores)
        shown = "ensemble" if "ensemble" in scores else next(iter(scores))
        runtimes = scored.data.normalized_runtimes()
        figures = {
            "_per_program.png": plots.per_program_errors(rows),
            "_pred_vs_true.png": plots.predicted_vs_true(scores[shown], runtimes, shown),
        }
        return Evaluation(markdown(rows), {".csv": csv_text(rows)}, figures)


class TileTask(Task):
    """tile:xla for the conductor (`core/conductor.py`): kernels ranked by top-K error."""

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
        splits = ("train", "valid", "test")
        root, toy, toy_fallback = training_root(TILE_PLACE, args.data_root, log)
        raw = load_splits(
            root,
            splits,
            max_files=args.max_files,
            cache_dir=args.cache_dir,
            progress=progress,
            log=log,
        )
        # The cache key's salt: tile runs have always been identified by it.
        source = data_identity(root, splits, args.max_files, FINGERPRINT_SALT, toy_fallback)
        stats = FeatureStats.fit_split(raw["train"])
        kwargs = args.model_kwargs()
        derived = {
            "estimates": uses_estimates(kwargs),
            "architecture": uses_architecture(kwargs),
        }
        data = {name: stats.normalize_split(split, **derived) for name, split in raw.items()}
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
            notice=toy_banner(TILE_PLACE, f"the data root is {root}") if toy else None,
        )

    def most_configs(self, loaded: Loaded) -> int:
        return int(loaded.train.num_configs.max())

    def batches(self, args: TrainArgs, loaded: Loaded, configs: int, replicas: int):
        """Train batches drawn by `--sampling`; validation batches of one fixed sample."""
        from baselines.core.keras_fit import EpochBatches
        from baselines.tiles.kernel_batches import batch_source

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

    def build_model(self, args: TrainArgs, configs: int):
        from baselines.tiles.model_builder import build_model, create_variables

        model = build_model(args.model, configs, args.model_kwargs())
        create_variables(model)
        return model

    def to_model_inputs(self, batch):
        from baselines.tiles.kernel_batches import graph_from_batch

        return graph_from_batch(batch)

    def run_label(self, args: TrainArgs, run_hash: str) -> str:
        return "-".join(p for p in (args.model, args.run_id, run_hash[:8]) if p)

    def evaluate(self, args: TrainArgs, model, loaded: Loaded, record, progress: bool, log):
        """Top-K errors of the validation (and labelled test) kernels; the test scores."""
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
        from baselines.tiles.predict import ranking_rows

        csv_path = Path(
            args.results_csv
            or Path(args.out_dir).expanduser() / f"results_{int(time.time() * 1000)}.csv"
        )
        write_csv_atomic(csv_path.expanduser(), HEADER, ranking_rows(loaded.test.tile_ids, outputs))
        record["results_csv"] = str(csv_path)
        log(f"wrote {csv_path} ({len(loaded.test)} test kernels)")


def train(args: TrainArgs, *, progress: bool = True, log=print, strategy=None) -> dict[str, Any]:
    """Trains, evaluates and saves one tile run (`core.conductor.train_run`); its record:
    record = train(TrainArgs(model="MLP", max_files=100, epochs=5))
    record["final_error"]["val"]     # {"1": ..., "5": ..., "10": ...}
    """
    from baselines.core.conductor import train_run

    return train_run(TileTask(), args, strategy=strategy, progress=progress, log=log)
