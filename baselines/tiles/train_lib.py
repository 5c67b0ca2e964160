"""Training a tile cost model under a listwise ranking loss.

    record = train(TrainArgs(model="MLP", toy_data=True, epochs=5))
    record["final_error"]["val"]     # {"1": ..., "5": ..., "10": ...}

Each epoch samples `configs` configurations per train kernel (kernels with fewer
are padded and masked, see graph.py), runs one compiled train step per batch,
then measures OPA on a fixed sample of validation batches. The parameters of the
best validation OPA are restored at the end, the full validation split is
ranked with all its configurations, and the run is saved (run_files.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tqdm

from baselines.tiles import metrics
from baselines.tiles.data import OPCODE_VOCAB_SIZE, TileSplit, load_splits, resolve_data_root
from baselines.tiles.features import FeatureStats
from baselines.tiles.graph import (
    BATCH_SIGNATURE,
    assemble_batch,
    graph_from_batch,
    sample_config_slots,
    to_tensors,
)
from baselines.tiles.models import TileModel, build_model, create_variables
from baselines.tiles.predict import ConfigScorer, ranking_rows
from baselines.tiles.run_files import save_model, write_run_file
from baselines.tiles.submission import HEADER, write_csv_atomic
from baselines.tiles.train_args import TrainArgs


def set_determinism(seed: int) -> None:
    """Same seed and data give the same run on CPU."""
    tf.keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


def program_balanced_weights(split: TileSplit) -> np.ndarray:
    """Per-kernel sampling probabilities that give every program the same share."""
    programs = [metrics.program_of(str(t)) for t in split.tile_ids]
    _, program_index, counts = np.unique(programs, return_inverse=True, return_counts=True)
    weights = 1.0 / counts[program_index]
    return weights / weights.sum()


def sampled_batches(
    split: TileSplit,
    rng: np.random.Generator,
    batch_size: int,
    num_configs: int,
    weights: np.ndarray | None = None,
) -> Iterator[dict[str, np.ndarray]]:
    """One epoch: kernels in a random order, `num_configs` sampled slots each.

    With `weights`, an epoch draws as many kernels as the split holds, with
    replacement, each with its weight's probability (e.g. program-balanced).
    """
    if weights is None:
        order = rng.permutation(len(split))
    else:
        order = rng.choice(len(split), size=len(split), replace=True, p=weights)
    for start in range(0, len(order), batch_size):
        ids = order[start : start + batch_size].tolist()
        slots = [sample_config_slots(rng, int(split.num_configs[i]), num_configs) for i in ids]
        yield assemble_batch(split, ids, slots, num_configs)


def prefetched(batches: Callable[[], Iterator[dict]], depth: int = 2) -> tf.data.Dataset:
    """Assembles numpy batches on a background thread while the model trains."""
    return tf.data.Dataset.from_generator(batches, output_signature=BATCH_SIGNATURE).prefetch(depth)


@dataclasses.dataclass
class Trainer:
    """Compiled train and evaluation steps; each traces once for any batch shape."""

    model: TileModel
    loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor]
    optimizer: tf.keras.optimizers.Optimizer
    num_configs: int
    traces: dict[str, int] = dataclasses.field(default_factory=lambda: {"train": 0, "eval": 0})

    def __post_init__(self):
        self.train_step = tf.function(
            self._train_step, input_signature=[BATCH_SIGNATURE], autograph=False
        )
        self.eval_step = tf.function(
            self._eval_step, input_signature=[BATCH_SIGNATURE], autograph=False
        )

    def _forward(self, batch, training):
        graph = graph_from_batch(batch)
        runtimes = tf.reshape(batch["config_runtimes"], [-1, self.num_configs])
        scores = self.model.forward(graph, self.num_configs, training=training)
        return runtimes, scores

    def _train_step(self, batch):
        self.traces["train"] += 1  # Python side effect: counts traces, not steps.
        with tf.GradientTape() as tape:
            runtimes, scores = self._forward(batch, training=True)
            loss = self.loss_fn(runtimes, scores)
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return (loss, *metrics.pair_counts(runtimes, scores))

    def _eval_step(self, batch):
        self.traces["eval"] += 1
        runtimes, scores = self._forward(batch, training=False)
        return (self.loss_fn(runtimes, scores), *metrics.pair_counts(runtimes, scores))

    def run(self, step, batches, total: int, desc: str, progress: bool) -> tuple[float, float]:
        """Mean loss and pooled OPA of `step` over `batches`."""
        losses, correct, pairs = [], 0.0, 0.0
        for batch in tqdm.tqdm(batches, total=total, desc=desc, leave=False, disable=not progress):
            loss, c, p = step(batch)
            losses.append(float(loss))
            correct += float(c)
            pairs += float(p)
        return float(np.mean(losses)) if losses else float("nan"), correct / max(pairs, 1.0)


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
    """Adam (the baseline) or AdamW, at `learning_rate(args, steps_per_epoch)`."""
    rate = learning_rate(args, steps_per_epoch)
    if args.optimizer == "adamw":
        return tf.keras.optimizers.AdamW(
            learning_rate=rate, weight_decay=args.weight_decay, clipnorm=args.clip_norm
        )
    return tf.keras.optimizers.Adam(learning_rate=rate, clipnorm=args.clip_norm)


def prepare_splits(
    args: TrainArgs, splits: tuple[str, ...], log: Callable[[str], None], progress: bool
) -> tuple[dict[str, TileSplit], FeatureStats, Path]:
    """Loads splits, fits feature statistics on train only, normalizes every split."""
    root = resolve_data_root(args.data_root, log)
    raw = load_splits(
        root, splits, toy_data=args.toy_data, cache_dir=args.cache_dir, progress=progress
    )
    stats = FeatureStats.fit_split(raw["train"])
    return {name: stats.normalize_split(s) for name, s in raw.items()}, stats, root


def evaluate_split(
    scorer: ConfigScorer, split: TileSplit, progress: bool
) -> tuple[list[np.ndarray], dict[str, float] | None]:
    """Scores of every kernel and, when the split has labels, its error summary."""
    scores = scorer.score_split(split, progress=progress)
    if not split.has_labels:
        return scores, None
    return scores, metrics.summarize(list(split.tile_ids), scores, split.normalized_runtimes())


def train(
    args: TrainArgs, *, progress: bool = True, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Trains, evaluates and saves one run; returns its run record."""
    args.validate()
    set_determinism(args.seed)
    run_hash = args.run_hash()
    out_dir = Path(args.out_dir).expanduser()
    splits_needed = ("train", "valid", "test")
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    data, stats, root = prepare_splits(args, splits_needed, log, progress)
    timings["load_s"] = time.perf_counter() - clock
    train_split, valid_split = data["train"], data["valid"]
    log(
        f"data: {root} ({len(train_split)} train, {len(valid_split)} valid, "
        f"{len(data['test'])} test kernels)"
    )

    model = build_model(args.model, args.configs, args.model_kwargs())
    create_variables(model)
    num_train_batches = -(-len(train_split) // args.batch)
    optimizer = make_optimizer(args, num_train_batches)
    optimizer.build(model.trainable_variables)  # slots made inside the step would retrace it
    loss_fn = metrics.make_loss_fn(metrics.parse_losses(args.losses))
    trainer = Trainer(model, loss_fn, optimizer, args.configs)

    rng = np.random.default_rng(args.seed)
    val_batches = [
        to_tensors(b)
        for b in sampled_batches(
            valid_split, np.random.default_rng(args.seed + 1), args.batch, args.configs
        )
    ]
    if args.validate_batches > 0:
        val_batches = val_batches[: args.validate_batches]
    weights = program_balanced_weights(train_split) if args.sampling == "balanced" else None

    out_dir.mkdir(parents=True, exist_ok=True)
    writer = tf.summary.create_file_writer(str(out_dir / f"tb_{run_hash}"))
    curve: dict[str, list] = {
        k: [] for k in ("epoch", "train_loss", "train_opa", "val_loss", "val_opa")
    }
    best_opa, best_epoch, best_weights = -1.0, 0, None
    started = time.perf_counter()
    epochs = tqdm.trange(
        args.epochs, desc=f"train {args.model}", unit="epoch", disable=not progress
    )
    for epoch in epochs:
        dataset = prefetched(
            lambda: sampled_batches(train_split, rng, args.batch, args.configs, weights)
        )
        train_loss, train_opa = trainer.run(
            trainer.train_step, dataset, num_train_batches, f"epoch {epoch}", progress
        )
        val_loss, val_opa = trainer.run(
            trainer.eval_step, val_batches, len(val_batches), "validate", progress
        )
        for key, value in zip(curve, (epoch, train_loss, train_opa, val_loss, val_opa)):
            curve[key].append(value)
        with writer.as_default(step=epoch):
            for key in ("train_loss", "train_opa", "val_loss", "val_opa"):
                tf.summary.scalar(key, curve[key][-1])
        epochs.set_postfix(loss=f"{train_loss:.4f}", val_opa=f"{val_opa:.4f}")
        if val_opa > best_opa:
            best_opa, best_epoch = val_opa, epoch
            best_weights = [v.numpy() for v in model.variables]
        elif epoch - best_epoch >= args.early_stop:
            log(f"early stop after epoch {epoch}: no val OPA gain for {args.early_stop} epochs")
            break
    writer.flush()
    train_seconds = time.perf_counter() - started
    for variable, value in zip(model.variables, best_weights):
        variable.assign(value)
    log(
        f"best val OPA {best_opa:.4f} at epoch {best_epoch}; "
        f"train step traced {trainer.traces['train']}x, eval step {trainer.traces['eval']}x"
    )

    scorer = ConfigScorer(model)
    clock = time.perf_counter()
    _, val_summary = evaluate_split(scorer, valid_split, progress)
    timings["val_eval_s"] = time.perf_counter() - clock
    top_ks = [str(k) for k in metrics.TOP_KS]
    final_error = {"val": {k: val_summary[k] for k in top_ks}}
    test_split = data["test"]
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

    record = {
        "args": args.to_dict(),
        "run_hash": run_hash,
        "model": args.model,
        "model_kwargs": args.model_kwargs(),
        "configs": args.configs,
        "opcode_vocab_size": OPCODE_VOCAB_SIZE,
        "feature_stats": stats.to_dict(),
        "data_root": str(root),
        "train_curve": curve,
        "best_epoch": best_epoch,
        "timings": {**timings, "train_s": train_seconds},
        "traces": dict(trainer.traces, predict=scorer.traces),
        "final_error": final_error,
        "val_summary": val_summary,
        "test_predictions": test_predictions,
    }
    save_model(model, out_dir / f"model_{run_hash}")
    write_run_file(out_dir / f"run_{run_hash}.jsonz", record)
    log("val top-1/5/10 error: " + " / ".join(f"{final_error['val'][k]:.4f}" for k in top_ks))
    log(f"saved {out_dir / f'model_{run_hash}'} and {out_dir / f'run_{run_hash}.jsonz'}")
    if args.test_mode == "predictions":
        csv_path = Path(args.results_csv or out_dir / f"results_{int(time.time() * 1000)}.csv")
        write_csv_atomic(
            csv_path.expanduser(), HEADER, ranking_rows(test_split.tile_ids, test_scores)
        )
        record["results_csv"] = str(csv_path)
        log(f"wrote {csv_path} ({len(test_split)} test kernels)")
    return record
