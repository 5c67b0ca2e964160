"""The conductor: one training run of any collection (`train_run`), from flags to saved files."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from baselines.core import distribution, metrics
from baselines.core.errors import PipelineError
from baselines.core.io_utils import describe_write_error, remove_stale_temporaries
from baselines.core.keras_fit import RankingTrainer, capped_configs, compile_trainer
from baselines.core.run_files import RUN_IN_MODEL
from baselines.core.run_json import read_gzip_json
from baselines.core.runner import (
    FitCallbacks,
    FitPlan,
    FitResult,
    RunFiles,
    fit_run,
    set_determinism,
)
from baselines.core.saved_model import save_finished_run
from baselines.core.task import Loaded, Task
from baselines.core.tensorboard import HParams

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
                claims.append(read_gzip_json(run_file).get("data", {}).get("identity"))
            except PipelineError:
                claims.append(None)
    tb = out_dir / f"tb_{run_hash}"
    if tb.is_dir():
        try:
            claims.append(json.loads((tb / DATA_MARKER).read_text()).get("identity"))
        except (OSError, ValueError, AttributeError):
            claims.append(None)
    return claims


def choose_run_hash(args: Any, out_dir: Path, loaded: Loaded) -> tuple[str, str]:
    """The hash that names this run's files, and why when it is not `args.run_hash()`."""
    base = args.run_hash()
    if loaded.identity is None:
        return base, ""
    if loaded.toy_fallback:
        reason = "the bundled toy set stands in for the missing data root"
    else:
        claims = _claimed_identities(out_dir, base)
        if all(claim == loaded.identity for claim in claims):
            return base, ""
        reason = f"{out_dir} already holds run {base} of other or unknown data"
    keyed = {**args.hash_view(args.to_dict()), "data_identity": loaded.identity}
    return hashlib.md5(json.dumps(keyed, sort_keys=True).encode()).hexdigest(), reason


def mark_tensorboard(tb_dir: Path, loaded: Loaded) -> None:
    """Marks `tb_dir` with the data the run trains on (`choose_run_hash` reads it)."""
    if loaded.identity is None:
        return
    try:
        tb_dir.mkdir(parents=True, exist_ok=True)
        (tb_dir / DATA_MARKER).write_text(json.dumps(loaded.facts.get("data", {})))
    except OSError as e:
        raise PipelineError(
            f"cannot write {tb_dir}: {describe_write_error(e)}; "
            "free space or choose another --out_dir"
        ) from None


@dataclasses.dataclass(frozen=True)
class Fitted:
    """A fitted model, what `fit_run` returned, and the batches' shape of the run."""

    model: tf.keras.Model
    result: FitResult
    configs: int
    steps_per_epoch: int
    epochs: int

    def record_fields(self, replicas: int) -> dict[str, Any]:
        return {
            "configs": self.configs,
            "steps_per_epoch": self.steps_per_epoch,
            "epochs": self.epochs,
            "replicas": replicas,
            **self.result.record_fields(),
        }


def fit_model(
    task: Task,
    args: Any,
    loaded: Loaded,
    *,
    model: tf.keras.Model | None = None,
    strategy: tf.distribute.Strategy,
    files: RunFiles | None = None,
    progress: str | None = None,
    log: Callable[[str], None] = print,
) -> Fitted:
    """Fits `model` (unbuilt; default: the task builds it) on `loaded` with the task's batches."""
    configs = capped_configs(args.configs, task.most_configs(loaded), task.unit, log)
    train_batches, val_batches = task.batches(args, loaded, configs, strategy.num_replicas_in_sync)
    steps = train_batches.updates  # the optimizer's steps per epoch
    epochs, validation_freq = task.schedule(args, steps, log)
    loss_fn = metrics.make_loss_fn(metrics.parse_losses(args.losses))

    def build_trainer() -> RankingTrainer:
        built = model if model is not None else task.build_model(args, configs)
        if model is not None and not model.built:
            model.create_variables()
        trainer = RankingTrainer(
            built,
            loss_fn,
            configs,
            to_graph=task.to_model_inputs,
            accumulate=train_batches.micro > 0,
        )
        compile_trainer(trainer, task.optimizer(args, epochs, steps))
        return trainer

    first, extra_curve = task.callbacks(val_batches)
    plan = FitPlan(epochs, validation_freq, args.early_stop, args.average_from)
    result = fit_run(
        build_trainer,
        train_batches,
        val_batches,
        plan,
        FitCallbacks(first=first, extra_curve=extra_curve),
        files or RunFiles(),
        strategy=strategy,
        progress=progress,
        log=log,
    )
    return Fitted(result.trainer.tile_model, result, configs, steps, epochs)


def train_run(
    task: Task,
    args: Any,
    *,
    strategy: tf.distribute.Strategy | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Trains, evaluates and saves one run of `task` into `args.out_dir`; returns its record."""
    task.check(args, log)
    strategy = strategy or tf.distribute.get_strategy()
    set_determinism(args.seed)
    chief = distribution.is_chief(strategy)
    out_dir = Path(args.out_dir).expanduser()
    if chief:
        for folder in {out_dir, *([Path(args.cache_dir).expanduser()] if args.cache_dir else [])}:
            remove_stale_temporaries(folder, log)
    clock = time.perf_counter()
    loaded = task.load(args, progress, log)
    load_s = time.perf_counter() - clock
    run_hash, why = choose_run_hash(args, out_dir, loaded)
    if why:
        log(f"run {run_hash}: named with its data identity ({why})")
    if chief:
        mark_tensorboard(out_dir / f"tb_{run_hash}", loaded)
    fitted = fit_model(
        task,
        args,
        loaded,
        strategy=strategy,
        files=RunFiles(
            backup_dir=out_dir / f"backup_{run_hash}",
            tb_dir=out_dir / f"tb_{run_hash}",
            hparams=HParams.of_flags(
                args.to_dict(),
                task.not_hparams,
                task.hparams_metrics,
                task.run_label(args, run_hash),
            ),
        ),
        progress=f"train {args.model}" if progress else None,
        log=log,
    )
    record = {
        "collection": task.collection,
        "args": args.to_dict(),
        "run_hash": run_hash,
        "model": args.model,
        "model_kwargs": args.model_kwargs(),
        **loaded.facts,
        **fitted.record_fields(strategy.num_replicas_in_sync),
    }
    if not chief:
        log(f"trained {args.model} as a worker; the chief evaluates and saves the run")
        return {**record, "chief": False}
    evaluation, outputs = task.evaluate(args, fitted.model, loaded, record, progress, log)
    timings = {"load_s": load_s, **evaluation.pop("timings", {}), **record["timings"]}
    traces = {**record["traces"], **evaluation.pop("traces", {})}
    record.update(evaluation, timings=timings, traces=traces)
    save_finished_run(fitted.model, record, out_dir, log)
    task.finish(args, record, outputs, loaded, log)
    if loaded.notice:
        log(loaded.notice)
    return record
