"""Training a tile cost model under a listwise ranking loss.

    record = train(TrainArgs(model="MLP", toy_data=True, epochs=5))
    record["final_error"]["val"]     # {"1": ..., "5": ..., "10": ...}

Keras `fit` runs the epochs (`core/keras_fit.py`). Each epoch samples `configs`
configurations per train kernel (kernels with fewer are padded and masked, see
graph.py), runs one compiled train step per batch, then measures OPA on a fixed
sample of validation batches. Early stopping on val OPA ends on the best
epoch's parameters, the full validation split is ranked with all its
configurations, and the run is saved (run_files.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from baselines.core import distribution, keras_fit, metrics
from baselines.core.errors import PipelineError
from baselines.core.fused_adam import FusedAdam, FusedAdamW
from baselines.core.io_utils import (
    describe_write_error,
    remove_stale_temporaries,
)
from baselines.core.runner import fit_run, set_determinism
from baselines.core.saved_model import save_finished_run
from baselines.core.submission import HEADER, write_csv_atomic
from baselines.core.tensorboard import HParams
from baselines.tiles.data import (
    OPCODE_VOCAB_SIZE,
    TileSplit,
    data_identity,
    load_splits,
)
from baselines.tiles.data_roots import resolve_data_root, toy_data_banner
from baselines.tiles.features import FeatureStats, uses_estimates
from baselines.tiles.graph import batch_source, graph_from_batch
from baselines.tiles.model_builder import build_model, create_variables
from baselines.tiles.predict import ConfigScorer, ranking_rows
from baselines.tiles.run_files import RUN_IN_MODEL, read_run_file
from baselines.tiles.task import DEFAULT_DATA_ROOT, TrainArgs


def program_balanced_weights(split: TileSplit) -> np.ndarray:
    """Per-kernel sampling probabilities that give every program the same share."""
    programs = [metrics.program_of(str(t)) for t in split.tile_ids]
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


def learning_rate(
    args: TrainArgs, steps_per_epoch: int
) -> float | tf.keras.optimizers.schedules.LearningRateSchedule:
    """`--lr` (constant, the baseline), or Keras' cosine decay over every training step.

    With warm-up, the rate rises linearly from lr / 100 to lr over
    `warmup_epochs`, then decays along a cosine to lr / 100 at the last step.
    """
    if args.lr_schedule != "cosine":
        return args.lr
    total = max(2, args.epochs * steps_per_epoch)
    warmup = min(args.warmup_epochs * steps_per_epoch, total - 1)
    return tf.keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=args.lr / 100 if warmup else args.lr,
        decay_steps=total - warmup,
        alpha=0.01,
        warmup_target=args.lr if warmup else None,
        warmup_steps=warmup,
    )


def make_optimizer(args: TrainArgs, steps_per_epoch: int) -> tf.keras.optimizers.Optimizer:
    """Adam (the baseline) or AdamW, at `learning_rate(args, steps_per_epoch)`.

    Keras' optimizers with fewer ops per variable (`fused_adam`): the same
    updates, a shorter step on CPU.
    """
    rate = learning_rate(args, steps_per_epoch)
    if args.optimizer == "adamw":
        return FusedAdamW(
            learning_rate=rate, weight_decay=args.weight_decay, clipnorm=args.clip_norm
        )
    return FusedAdam(learning_rate=rate, clipnorm=args.clip_norm)


# Flags that name where things are, not what was trained: left out of HParams.
_NOT_HPARAMS = ("out_dir", "cache_dir", "results_csv")


# Scalars the HParams dashboard shows beside each run's flags: (tag, run, title).
HPARAMS_METRICS = (
    ("epoch_top5_err", "validation", "val top-5 error (sampled configs)"),
    ("epoch_top1_err", "validation", "val top-1 error (sampled configs)"),
    ("epoch_top10_err", "validation", "val top-10 error (sampled configs)"),
    ("epoch_opa", "validation", "val OPA"),
    ("epoch_loss", "validation", "val loss"),
    ("epoch_loss", "train", "train loss"),
)


def run_hparams(args: TrainArgs, run_hash: str) -> HParams:
    """The run on TensorBoard's HParams dashboard: model, --run_id and the recipe's flags."""
    return HParams.of_flags(
        args.to_dict(), _NOT_HPARAMS, HPARAMS_METRICS, run_label(args, run_hash)
    )


def run_label(args: TrainArgs, run_hash: str) -> str:
    """A readable run name: model, --run_id when given, and the run hash's first 8 digits."""
    parts = [args.model, args.run_id, run_hash[:8]]
    return "-".join(p for p in parts if p)


def prepare_splits(
    args: TrainArgs, splits: tuple[str, ...], log: Callable[[str], None], progress: bool
) -> tuple[dict[str, TileSplit], FeatureStats, dict[str, Any]]:
    """Loads splits, fits feature statistics on train only, normalizes every split.

    Also returns the data's identity (`data.data_identity`: root, whether the
    toy set stood in for a missing default root, file fingerprints).
    """
    root, toy_fallback = resolve_data_root(args.data_root, DEFAULT_DATA_ROOT, log)
    raw = load_splits(
        root, splits, toy_data=args.toy_data, cache_dir=args.cache_dir, progress=progress, log=log
    )
    identity = data_identity(root, splits, args.toy_data, toy_fallback)
    stats = FeatureStats.fit_split(raw["train"])
    estimates = uses_estimates(args.model_kwargs())
    normalized = {name: stats.normalize_split(s, estimates) for name, s in raw.items()}
    return normalized, stats, identity


# Written into tb_<hash>/ when a run starts: which data the folder's logs are of.
DATA_MARKER = "data_identity.json"


def _claimed_identities(out_dir: Path, run_hash: str) -> list[str | None]:
    """Data identities of what already uses `run_hash` in `out_dir` (None: unknown)."""
    claims: list[str | None] = []
    for run_file in (
        out_dir / f"model_{run_hash}" / RUN_IN_MODEL,
        out_dir / f"run_{run_hash}.jsonz",
    ):
        if run_file.is_file():
            try:
                claims.append(read_run_file(run_file).get("data", {}).get("identity"))
            except PipelineError:
                claims.append(None)
    tb = out_dir / f"tb_{run_hash}"
    if tb.is_dir():
        try:
            claims.append(json.loads((tb / DATA_MARKER).read_text()).get("identity"))
        except (OSError, ValueError, AttributeError):
            claims.append(None)
    return claims


def choose_run_hash(args: TrainArgs, out_dir: Path, data: dict[str, Any]) -> tuple[str, str]:
    """The hash that names this run's files, and why when it is not `args.run_hash()`.

    The baseline's hash (md5 of the sorted JSON of the args) while the files under
    it are of the same data (or there are none yet): a rerun on the same data
    replaces or resumes its run. When they hold another data set's run (or
    one whose data is unknown: older files), or when the toy set stands in for
    a missing --data_root, the data identity joins the args in the hash, so
    runs on different data never share a model, run file or TensorBoard folder.
    """
    base = args.run_hash()
    if data["toy_fallback"]:
        reason = "the bundled toy set stands in for the missing data root"
    else:
        claims = _claimed_identities(out_dir, base)
        if all(claim == data["identity"] for claim in claims):
            return base, ""
        reason = f"{out_dir} already holds run {base} of other or unknown data"
    keyed = {**args.to_dict(), "data_identity": data["identity"]}
    return hashlib.md5(json.dumps(keyed, sort_keys=True).encode()).hexdigest(), reason


def effective_epochs(args: TrainArgs, steps_per_epoch: int, log: Callable[[str], None]) -> int:
    """`--epochs`, or fewer where `--max_train_steps` caps the run (said in a line).

    A recipe's schedule is tuned as a number of optimizer steps; on a larger
    train split the same epochs take proportionally more steps. The cap keeps
    whole epochs: the smallest count that reaches `max_train_steps`.
    """
    if not args.max_train_steps:
        return args.epochs
    capped = -(-args.max_train_steps // steps_per_epoch)
    if capped >= args.epochs:
        return args.epochs
    log(
        f"note: --max_train_steps={args.max_train_steps} caps this run at {capped} epochs of "
        f"{steps_per_epoch} steps (--epochs={args.epochs}); the schedule spans the {capped}"
    )
    return capped


def evaluate_split(
    scorer: ConfigScorer, split: TileSplit, progress: bool
) -> tuple[list[np.ndarray], dict[str, float] | None]:
    """Scores of every kernel and, when the split has labels, its error summary."""
    scores = scorer.score_split(split, progress=progress)
    if not split.has_labels:
        return scores, None
    return scores, metrics.summarize(list(split.tile_ids), scores, split.normalized_runtimes())


def make_batches(
    args: TrainArgs, train_split: TileSplit, valid_split: TileSplit, configs: int, replicas: int
) -> tuple[keras_fit.EpochBatches, keras_fit.EpochBatches]:
    """The train batches (sampled by `--sampling`) and the validation batches, which draw
    one fixed sample of configs per kernel, the same every epoch."""
    weights = sampling_weights(args, train_split)
    train_batches = keras_fit.EpochBatches(
        batch_source(train_split),
        args.batch,
        configs,
        args.seed,
        weights=weights,
        num_replicas=replicas,
    )
    val_batches = keras_fit.EpochBatches(
        batch_source(valid_split),
        args.batch,
        configs,
        args.seed + 1,
        fixed_epoch=0,
        max_steps=args.validate_batches,
        num_replicas=replicas,
    )
    return train_batches, val_batches


def mark_tensorboard(tb_dir: Path, source: dict[str, Any]) -> None:
    """Marks `tb_dir` with the data the run trains on (`choose_run_hash` reads it)."""
    try:
        tb_dir.mkdir(parents=True, exist_ok=True)
        (tb_dir / DATA_MARKER).write_text(json.dumps(source))
    except OSError as e:
        raise PipelineError(
            f"cannot write {tb_dir}: {describe_write_error(e)}; "
            "free space or choose another --out_dir"
        ) from None


def evaluate_run(
    args: TrainArgs,
    scorer: ConfigScorer,
    valid_split: TileSplit,
    test_split: TileSplit,
    timings: dict[str, float],
    progress: bool,
    log: Callable[[str], None],
) -> tuple[dict[str, dict], dict[str, Any], list[np.ndarray], dict[str, list[int]]]:
    """(top-K errors per split, the validation summary, the test scores, the test top-5s).

    Every configuration of every kernel is scored. Test errors only with
    `--test_mode=metrics` and test runtimes; test predictions only with
    `--test_mode=predictions` (NaN or infinite scores refused). Adds the
    scoring seconds to `timings`.
    """
    clock = time.perf_counter()
    _, val_summary = evaluate_split(scorer, valid_split, progress)
    timings["val_eval_s"] = time.perf_counter() - clock
    top_ks = [str(k) for k in metrics.TOP_KS]
    final_error = {"val": {k: val_summary[k] for k in top_ks}}
    clock = time.perf_counter()
    test_scores, test_summary = evaluate_split(scorer, test_split, progress)
    timings["test_eval_s"] = time.perf_counter() - clock
    test_predictions = {}
    if args.test_mode == "metrics":
        if test_summary is None:
            log("note: the test split has no runtimes (hidden labels); no test errors")
        else:
            final_error["test"] = {k: test_summary[k] for k in top_ks}
    else:
        metrics.require_finite_scores(test_split.tile_ids, test_scores, "test kernels")
        test_predictions = {
            str(t): metrics.top_configs(s, 5) for t, s in zip(test_split.tile_ids, test_scores)
        }
    return final_error, val_summary, test_scores, test_predictions


def save_outputs(
    args: TrainArgs,
    model: tf.keras.Model,
    record: dict[str, Any],
    out_dir: Path,
    test_split: TileSplit,
    test_scores: list[np.ndarray],
    log: Callable[[str], None],
) -> None:
    """Saves the finished run (`core.saved_model.save_finished_run`) and, with
    `--test_mode=predictions`, writes the results CSV (its path goes into `record`)."""
    errors = " / ".join(f"{record['final_error']['val'][str(k)]:.4f}" for k in metrics.TOP_KS)
    log(f"val top-1/5/10 error: {errors}")
    save_finished_run(model, record, out_dir, log)
    if args.test_mode == "predictions":
        csv_path = Path(args.results_csv or out_dir / f"results_{int(time.time() * 1000)}.csv")
        write_csv_atomic(
            csv_path.expanduser(), HEADER, ranking_rows(test_split.tile_ids, test_scores)
        )
        record["results_csv"] = str(csv_path)
        log(f"wrote {csv_path} ({len(test_split)} test kernels)")


def name_run(
    args: TrainArgs,
    out_dir: Path,
    source: dict[str, Any],
    data: dict[str, TileSplit],
    log: Callable[[str], None],
) -> str:
    """The run's hash (`choose_run_hash`), with a line on the data it trains on."""
    sizes = ", ".join(f"{len(data[s])} {s}" for s in ("train", "valid", "test"))
    log(f"data: {source['root']} ({sizes} kernels)")
    run_hash, why = choose_run_hash(args, out_dir, source)
    if why:
        log(f"run {run_hash}: named with its data identity ({why})")
    return run_hash


def trainer_factory(
    args: TrainArgs, configs: int, steps_per_epoch: int
) -> Callable[[], keras_fit.RankingTrainer]:
    """What `fit_run` calls, under the strategy's scope, to build the model and its trainer."""

    def build_trainer() -> keras_fit.RankingTrainer:
        model = build_model(args.model, configs, args.model_kwargs())
        create_variables(model)
        loss_fn = metrics.make_loss_fn(metrics.parse_losses(args.losses))
        trainer = keras_fit.RankingTrainer(model, loss_fn, configs, to_graph=graph_from_batch)
        keras_fit.compile_trainer(trainer, make_optimizer(args, steps_per_epoch))
        return trainer

    return build_trainer


def run_facts(
    args: TrainArgs,
    run_hash: str,
    configs: int,
    steps_per_epoch: int,
    epochs: int,
    stats: FeatureStats,
    source: dict[str, Any],
) -> dict[str, Any]:
    """What a run record says of the run before training: its flags, model and data
    (`epochs`: the epochs it trains, which `--max_train_steps` may cap)."""
    return {
        "args": args.to_dict(),
        "run_hash": run_hash,
        "model": args.model,
        "model_kwargs": args.model_kwargs(),
        "configs": configs,
        "steps_per_epoch": steps_per_epoch,
        "epochs": epochs,
        "opcode_vocab_size": OPCODE_VOCAB_SIZE,
        "feature_stats": stats.to_dict(),
        "data_root": str(source["root"]),
        "data": source,
    }


def train(
    args: TrainArgs,
    *,
    progress: bool = True,
    log: Callable[[str], None] = print,
    strategy: tf.distribute.Strategy | None = None,
) -> dict[str, Any]:
    """Trains, evaluates and saves one run; returns its run record.

    Keras `fit` carries the loop under `strategy` (default: one device). A run
    killed mid-training resumes at its last finished epoch when started again
    with the same arguments (`BackupAndRestore` in `<out_dir>/backup_<hash>`).
    Under multi-worker training only the chief evaluates and writes files; the
    other workers return a record without evaluations.
    """
    args.validate()
    strategy = strategy or tf.distribute.get_strategy()
    set_determinism(args.seed)
    chief = distribution.is_chief(strategy)
    out_dir = Path(args.out_dir).expanduser()
    if chief:
        for folder in (out_dir, Path(args.cache_dir).expanduser()):
            remove_stale_temporaries(folder, log)
    clock = time.perf_counter()
    data, stats, source = prepare_splits(args, ("train", "valid", "test"), log, progress)
    timings: dict[str, float] = {"load_s": time.perf_counter() - clock}
    train_split, valid_split, test_split = data["train"], data["valid"], data["test"]
    run_hash = name_run(args, out_dir, source, data, log)
    most = int(train_split.num_configs.max())
    configs = keras_fit.capped_configs(args.configs, most, "kernel", log)
    replicas = strategy.num_replicas_in_sync
    train_batches, val_batches = make_batches(args, train_split, valid_split, configs, replicas)
    # The epochs this run trains; the run keeps its name and record of the given flags.
    schedule_args = dataclasses.replace(
        args, epochs=effective_epochs(args, train_batches.steps, log)
    )
    build_trainer = trainer_factory(schedule_args, configs, train_batches.steps)
    if chief:
        mark_tensorboard(out_dir / f"tb_{run_hash}", source)
    fitted = fit_run(
        build_trainer,
        train_batches,
        val_batches,
        strategy=strategy,
        epochs=schedule_args.epochs,
        early_stop=args.early_stop,
        chief=chief,
        backup_dir=out_dir / f"backup_{run_hash}",
        tb_dir=out_dir / f"tb_{run_hash}",
        validation_freq=schedule_args.validation_epochs(),
        average_from=args.average_from,
        hparams=run_hparams(args, run_hash),
        progress=f"train {args.model}" if progress else None,
        log=log,
    )
    model, fit_fields = fitted.trainer.tile_model, fitted.record_fields()
    if not chief:  # the chief evaluates and saves
        worker = {"args": args.to_dict(), "run_hash": run_hash, "chief": False}
        return {**worker, "train_curve": fit_fields["train_curve"]}

    scorer = ConfigScorer(model)
    evaluated = evaluate_run(args, scorer, valid_split, test_split, timings, progress, log)
    final_error, val_summary, test_scores, test_predictions = evaluated
    record = {
        **run_facts(
            args, run_hash, configs, train_batches.steps, schedule_args.epochs, stats, source
        ),
        **fit_fields,
        "timings": {**timings, **fit_fields["timings"]},
        "traces": dict(fit_fields["traces"], predict=scorer.traces),
        "replicas": replicas,
        "final_error": final_error,
        "val_summary": val_summary,
        "test_predictions": test_predictions,
    }
    save_outputs(args, model, record, out_dir, test_split, test_scores, log)
    if source["toy_fallback"]:
        log(toy_data_banner(f"{args.data_root} does not exist"))
    return record
