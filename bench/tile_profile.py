#!/usr/bin/env python3
"""Where a tile training run and a prediction spend their time, stage by stage.

    .venv/bin/python bench/tile_profile.py --data_root ~/data/synth_release \
        --cache_dir ~/data/synth_release_cache --out out/tile_profile

Run on a set sized like the release (`data/make_synthetic.py --preset
release`), with a warm cache. Each part runs in a fresh process:

1. **Import**: `import tensorflow, tensorflow_gnn` (median of `--repeats`).
2. **Training run** (`tiles.task.train`, the recipe's flags, `--epochs`,
   validating after every epoch): the load (read the cache + normalize),
   the first epoch (tracing of the train step included), the steady epoch
   (median of the later epochs' training steps), the per-epoch validation
   (median after the first), the end-of-epoch callbacks (backup, logs), and
   the final ranking of the validation and test splits. From the run
   record's timings (`EpochTimer`).
3. **One step, part by part** (pre-assembled batches, median ms per step over
   `--steps` steps, each part its own compiled function called once per
   step): assembling the batch in Python; forward; forward and backward;
   forward, backward and optimizer update; the full train step with its
   metrics; the same in the compiled loop of `STEPS_PER_EXECUTION` steps
   per call (what `fit` runs); forward and backward of the same kernels with
   one configuration each (the per-kernel part: op encoder, message passing,
   pooling), and its share of the arithmetic. The arithmetic of forward and backward
   (TensorFlow's profiler on a graph traced with each batch's static
   shapes) over the measured float32 throughput of a [4096, 128] x [128,
   128] matmul on every core (its own process: the steps run with one
   thread per op) gives the arithmetic floor of an epoch.
4. **Prediction**: `tiles_gen_predictions_csv.py` on the test split with the
   model of part 2, end to end (median of `--repeats`), and the ranking
   loop's own time it prints; its arithmetic floor: the FLOPs of the
   scoring calls (a sample, traced with static shapes, scaled to every
   configuration slot) over the same matmul throughput.

Writes `<out>/profile.json` and `<out>/profile.md` (a table: stage,
seconds, per epoch or per run, what it includes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_common import code_version
from bench_common import fmt as _fmt

from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.core.io_utils import atomic_write_text

PY = sys.executable
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
MATMUL_SHAPE = (4096, 128, 128)  # rows x inner x columns: a head / GAT-sized matmul


def run_part(part: str, spec: dict) -> dict:
    """Runs `part` of this script in a fresh process; its last stdout line is JSON."""
    proc = subprocess.run(
        [PY, __file__, f"--_{part}", json.dumps(spec)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **QUIET},
    )
    if proc.returncode != 0:
        raise PipelineError(f"{part} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _train_args(spec: dict, **overrides):
    from scale import train_args_from_flags

    return train_args_from_flags(
        [f"--flagfile={spec['recipe']}"],
        data_root=spec["data_root"],
        cache_dir=spec["cache_dir"],
        out_dir=spec["out_dir"],
        **overrides,
    )


def part_import(spec: dict) -> dict:
    started = time.perf_counter()
    import tensorflow  # noqa: F401
    import tensorflow_gnn  # noqa: F401

    return {"import_s": time.perf_counter() - started}


def epoch_figures(timings: dict) -> dict[str, float]:
    """A run record's per-epoch timings (`EpochTimer`) summarized: the first epoch (its
    training steps trace the train step) and the medians of the later ones."""
    return {
        "first_epoch_s": timings["epoch_train_s"][0],
        "steady_epoch_s": statistics.median(timings["epoch_train_s"][1:]),
        "first_val_s": timings["epoch_val_s"][0],
        "val_s": statistics.median(timings["epoch_val_s"][1:]),
        "callbacks_s": statistics.median(timings["epoch_callbacks_s"]),
    }


def part_train(spec: dict) -> dict:
    from baselines.core.startup import prepare_tensorflow_import, tile_thread_pools

    prepare_tensorflow_import(tile_thread_pools())
    from baselines.tiles.task import train

    args = _train_args(
        spec,
        epochs=spec["epochs"],
        eval_every=1,
        test_mode="predictions",
        results_csv=str(Path(spec["out_dir"]) / "results.csv"),
    )
    started = time.perf_counter()
    record = train(args, progress=False, log=lambda _: None)
    t = record["timings"]
    return {
        "run_s": time.perf_counter() - started,
        "load_s": t["load_s"],
        **epoch_figures(t),
        "val_ranking_s": t["val_eval_s"],
        "test_ranking_s": t["test_eval_s"],
        "model_dir": str(Path(args.out_dir) / f"model_{record['run_hash']}"),
        "val_top5_err": record["final_error"]["val"]["5"],
    }


def _flops(step_fn, batch: dict) -> int:
    """Float operations of `step_fn` on `batch`, from a trace with its static shapes."""
    import tensorflow as tf
    from tensorflow.python.profiler import model_analyzer, option_builder

    signature = {k: tf.TensorSpec(v.shape, v.dtype) for k, v in batch.items()}
    graph = tf.function(step_fn).get_concrete_function(signature).graph
    options = option_builder.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    return int(model_analyzer.profile(graph, options=options).total_float_ops)


def part_steps(spec: dict) -> dict:
    from baselines.core.startup import prepare_tensorflow_import, tile_thread_pools

    prepare_tensorflow_import(tile_thread_pools())
    import numpy as np
    import tensorflow as tf

    from baselines.core import keras_fit, metrics
    from baselines.core.runner import set_determinism
    from baselines.tiles.kernel_batches import (
        BATCH_SIGNATURE,
        batch_source,
        graph_from_batch,
        to_tensors,
    )
    from baselines.tiles.model_builder import build_model, create_variables
    from baselines.tiles.task import TileTask

    args = _train_args(spec, epochs=1)
    set_determinism(args.seed)
    split = TileTask().load(args, False, lambda _: None).train
    steps = spec["steps"]
    batches = keras_fit.EpochBatches(batch_source(split), args.batch, args.configs, args.seed)
    started = time.perf_counter()
    assembled = [b for _, b in zip(range(steps), batches.batches(0))]
    assemble_ms = 1000 * (time.perf_counter() - started) / len(assembled)
    tensors = [to_tensors(b) for b in assembled]

    model = build_model(args.model, args.configs, args.model_kwargs())
    create_variables(model)
    loss_fn = metrics.make_loss_fn(metrics.parse_losses(args.losses))
    trainer = keras_fit.RankingTrainer(model, loss_fn, args.configs, to_graph=graph_from_batch)
    keras_fit.compile_trainer(trainer, TileTask().optimizer(args, args.epochs, batches.steps))
    trainer.optimizer.build(model.trainable_variables)
    variables = model.trainable_variables

    def loss_of(batch):
        runtimes = tf.reshape(batch["config_runtimes"], [-1, args.configs])
        return trainer.loss_fn(runtimes, trainer(batch, training=True))

    def forward(batch):
        return loss_of(batch)

    def backward(batch):
        with tf.GradientTape() as tape:
            loss = loss_of(batch)
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]

    def summed(batch):
        return tf.add_n([tf.reduce_sum(g) for g in backward(batch)])

    def update(batch):
        trainer.optimizer.apply_gradients(zip(backward(batch), variables))
        return trainer.optimizer.iterations

    def timed(fn, inputs=tensors) -> float:
        compiled = tf.function(fn, input_signature=[BATCH_SIGNATURE])
        for b in inputs[:3]:
            compiled(b)
        started = time.perf_counter()
        for b in inputs:
            out = compiled(b)
        tf.nest.map_structure(lambda x: x.numpy(), out)
        return 1000 * (time.perf_counter() - started) / len(inputs)

    # The per-kernel part (op encoder, message passing, pooling) alone: the same
    # kernels with one configuration each, scores summed so every weight gets a gradient.
    single = keras_fit.EpochBatches(batch_source(split), args.batch, 1, args.seed)
    single_tensors = [to_tensors(b) for _, b in zip(range(steps), single.batches(0))]
    single_trainer = keras_fit.RankingTrainer(model, trainer.loss_fn, 1, to_graph=graph_from_batch)

    def kernel_part(batch):
        with tf.GradientTape() as tape:
            total = tf.reduce_sum(single_trainer(batch, training=True))
        grads = tape.gradient(total, variables)
        return tf.add_n([tf.reduce_sum(tf.convert_to_tensor(g)) for g in grads if g is not None])

    result = {
        "assemble_ms": assemble_ms,
        "forward_ms": timed(forward),
        "backward_ms": timed(summed),
        "update_ms": timed(update),
        "train_step_ms": timed(trainer.train_step),
        "kernel_part_ms": timed(kernel_part, single_tensors),
    }
    looped = tf.data.Dataset.from_generator(
        lambda: iter(assembled), output_signature=BATCH_SIGNATURE
    ).prefetch(2)
    loop = trainer.make_train_function()
    iterator = iter(looped.repeat())
    loop(iterator)  # trace
    calls = max(1, len(tensors) // keras_fit.STEPS_PER_EXECUTION)
    started = time.perf_counter()
    for _ in range(calls):
        out = loop(iterator)
    tf.nest.map_structure(lambda x: x.numpy(), out)
    result["looped_step_ms"] = (
        1000 * (time.perf_counter() - started) / (calls * keras_fit.STEPS_PER_EXECUTION)
    )

    sample = assembled[: spec["flop_batches"]]
    flops = [_flops(summed, to_tensors(b)) for b in sample]
    result["gflop_per_step"] = float(np.mean(flops)) / 1e9
    kernel_flops = [_flops(kernel_part, to_tensors(b)) for b in single_tensors[: len(sample)]]
    result["kernel_gflop_per_step"] = float(np.mean(kernel_flops)) / 1e9
    result["configs_per_step"] = args.batch * args.configs
    result["steps_per_epoch"] = batches.steps
    # In its own process: this one runs one thread per op (`tile_thread_pools`),
    # while the floor is what every core can do.
    result["matmul_gflops"] = run_part("matmul", spec)["matmul_gflops"]
    result["floor_epoch_s"] = (
        result["gflop_per_step"] * result["steps_per_epoch"] / result["matmul_gflops"]
    )
    return result


def part_matmul(spec: dict) -> dict:
    """float32 GFLOP/s of a `MATMUL_SHAPE` matmul with one thread per core: the floor's rate."""
    from baselines.core.startup import available_cores, prepare_tensorflow_import

    prepare_tensorflow_import()
    import tensorflow as tf

    # Explicit pools: an inherited TF_NUM_INTRAOP_THREADS must not lower the rate.
    tf.config.threading.set_intra_op_parallelism_threads(available_cores())
    tf.config.threading.set_inter_op_parallelism_threads(1)
    n, k, m = MATMUL_SHAPE
    a, b = tf.random.normal([n, k]), tf.random.normal([k, m])
    for _ in range(5):
        tf.linalg.matmul(a, b).numpy()
    repeats = 200
    started = time.perf_counter()
    for _ in range(repeats):
        c = tf.linalg.matmul(a, b)
    c.numpy()
    return {"matmul_gflops": 2 * n * k * m * repeats / (time.perf_counter() - started) / 1e9}


def part_scoring_flops(spec: dict) -> dict:
    """FLOPs per configuration slot of the prediction's scoring calls (a sample of them)."""
    from baselines.core.startup import prepare_tensorflow_import, tile_thread_pools

    prepare_tensorflow_import(tile_thread_pools())
    import numpy as np

    from baselines.tiles.data import load_split
    from baselines.tiles.kernel_batches import (
        assemble_batch,
        configs_per_kernel,
        graph_from_batch,
        to_tensors,
    )
    from baselines.tiles.predict import SavedRanker

    ranker = SavedRanker.load(spec["model_dir"])
    raw = load_split(Path(spec["data_root"]) / "test", name="test", progress=False)
    split = ranker.normalized(raw)
    scorer = ranker.scorer
    calls = scorer.plan(split)

    def forward(batch):
        graph = graph_from_batch(batch)
        return scorer.model.forward(graph, configs_per_kernel(graph), training=False)

    flops = slots = 0
    for call in calls[:: max(1, len(calls) // spec["flop_batches"])]:
        ids = [i for i, _, _ in call.ranges]
        ranges = [np.arange(start, stop) for _, start, stop in call.ranges]
        batch = to_tensors(assemble_batch(split, ids, ranges, call.slots))
        flops += _flops(forward, batch)
        slots += len(call.ranges) * call.slots
    all_slots = sum(len(call.ranges) * call.slots for call in calls)
    return {"scoring_gflop": flops / slots * all_slots / 1e9, "calls": len(calls)}


def part_predict(spec: dict) -> dict:
    cmd = [
        PY,
        str(ROOT / "tiles_gen_predictions_csv.py"),
        "--dir",
        spec["model_dir"],
        "--data_root",
        spec["data_root"],
        "--output",
        str(Path(spec["out_dir"]) / "predictions.csv"),
    ]
    started = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **QUIET}
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise PipelineError(f"prediction failed: {proc.stderr.strip().splitlines()[-1:]}")
    found = re.search(r"ranked (\d+) kernels, (\d+) configs in ([\d.]+) s", proc.stdout)
    if not found:
        raise PipelineError("prediction printed no ranking summary")
    return {"wall_s": wall, "ranking_s": float(found[3]), "configs": int(found[2])}


PARTS = {
    "import": part_import,
    "train": part_train,
    "steps": part_steps,
    "matmul": part_matmul,
    "scoring_flops": part_scoring_flops,
    "predict": part_predict,
}


def profile(spec: dict, repeats: int) -> dict:
    imports = [run_part("import", spec)["import_s"] for _ in range(repeats)]
    result = {"import_s": statistics.median(imports)}
    result["train"] = run_part("train", spec)
    result["steps"] = run_part("steps", spec)
    predictions = [
        run_part("predict", {**spec, "model_dir": result["train"]["model_dir"]})
        for _ in range(repeats)
    ]
    result["predict"] = {
        k: statistics.median(p[k] for p in predictions) for k in ("wall_s", "ranking_s")
    }
    result["predict"]["configs"] = predictions[0]["configs"]
    result["predict"].update(
        run_part("scoring_flops", {**spec, "model_dir": result["train"]["model_dir"]})
    )
    return result


def rows(r: dict) -> list[tuple[str, str, str]]:
    """(stage, seconds, what it includes) for the markdown table."""
    t, s, p = r["train"], r["steps"], r["predict"]
    per_epoch = s["steps_per_epoch"] / 1000
    return [
        ("import TensorFlow + TF-GNN", _fmt(r["import_s"]), "per process"),
        ("load: read the cache, normalize 3 splits", _fmt(t["load_s"]), "per run"),
        ("first epoch (traces the train step)", _fmt(t["first_epoch_s"]), "per run"),
        ("**steady epoch** (training steps only)", _fmt(t["steady_epoch_s"]), "per epoch"),
        ("per-epoch validation (fixed sample)", _fmt(t["val_s"]), "per epoch"),
        ("end-of-epoch callbacks (backup, logs)", _fmt(t["callbacks_s"]), "per epoch"),
        ("final ranking: validation split", _fmt(t["val_ranking_s"]), "per run"),
        ("final ranking: test split", _fmt(t["test_ranking_s"]), "per run"),
        ("step: assemble the batch (Python)", _fmt(s["assemble_ms"] * per_epoch), "per epoch"),
        ("step: forward", _fmt(s["forward_ms"] * per_epoch), "per epoch"),
        ("step: forward + backward", _fmt(s["backward_ms"] * per_epoch), "per epoch"),
        ("step: + optimizer update", _fmt(s["update_ms"] * per_epoch), "per epoch"),
        (
            "step: forward + backward, 1 configuration per kernel (the per-kernel part)",
            _fmt(s["kernel_part_ms"] * per_epoch),
            "per epoch",
        ),
        (
            "step: full train step, 1 step per call",
            _fmt(s["train_step_ms"] * per_epoch),
            "per epoch",
        ),
        (
            "step: full train step, compiled loop",
            _fmt(s["looped_step_ms"] * per_epoch),
            "per epoch",
        ),
        (
            f"arithmetic floor: {s['gflop_per_step'] * s['steps_per_epoch'] / 1000:.2f} TFLOP "
            f"({s['kernel_gflop_per_step'] / s['gflop_per_step']:.0%} per-kernel part) "
            f"at {s['matmul_gflops']:.0f} GFLOP/s",
            _fmt(s["floor_epoch_s"]),
            "per epoch",
        ),
        ("prediction of the test split, end to end", _fmt(p["wall_s"]), "per run"),
        ("prediction: its ranking loop", _fmt(p["ranking_s"]), "per run"),
        (
            f"prediction arithmetic floor: {p['scoring_gflop']:.0f} GFLOP "
            f"at {s['matmul_gflops']:.0f} GFLOP/s",
            _fmt(p["scoring_gflop"] / s["matmul_gflops"]),
            "per run",
        ),
    ]


def markdown(result: dict) -> str:
    s, t = result["profile"]["steps"], result["profile"]["train"]
    p = result["profile"]["predict"]
    lines = [
        f"# Tile profile: {result['recipe']} on {result['data_root']}",
        "",
        f"Commit {result['commit']}; {s['steps_per_epoch']} steps an epoch of "
        f"{s['configs_per_step']} configurations; steady epoch = "
        f"{t['steady_epoch_s'] / s['floor_epoch_s']:.2f}x the arithmetic floor, "
        f"{s['steps_per_epoch'] / t['steady_epoch_s']:.1f} steps/s, "
        f"{s['steps_per_epoch'] * s['configs_per_step'] / t['steady_epoch_s']:,.0f} configs/s. "
        f"Prediction ranks {result['profile']['predict']['configs'] / p['ranking_s']:,.0f} "
        f"configs/s, {p['ranking_s'] / (p['scoring_gflop'] / s['matmul_gflops']):.2f}x "
        "its arithmetic floor.",
        "",
        "| stage | s | per |",
        "|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows(result["profile"])]
    return "\n".join(lines) + "\n"


def build_parser():
    parser = entry_parser(__doc__)
    parser.add_argument("--data_root", help="a release-sized tile set (required)")
    parser.add_argument("--cache_dir", help="its (warm) cache folder (required)")
    parser.add_argument("--recipe", default=str(ROOT / "configs" / "recommended.flags"))
    parser.add_argument("--out", default="out/tile_profile")
    parser.add_argument("--epochs", type=int, default=4, help="epochs of the training run")
    parser.add_argument("--steps", type=int, default=200, help="steps timed per part")
    parser.add_argument("--flop_batches", type=int, default=20, help="batches whose FLOPs count")
    parser.add_argument("--repeats", type=int, default=3)
    for part in PARTS:
        parser.add_argument(f"--_{part}", help=argparse.SUPPRESS)
    return parser


def main() -> int:
    args = build_parser().parse_args()
    for part, fn in PARTS.items():
        given = getattr(args, f"_{part}")
        if given:
            print(json.dumps(fn(json.loads(given))))
            return 0
    if not args.data_root or not args.cache_dir:
        raise PipelineError("--data_root and --cache_dir are required")
    if args.epochs < 2:
        raise PipelineError("--epochs: at least 2 (the steady epoch is a later one)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = {
        "recipe": args.recipe,
        "data_root": str(Path(args.data_root).expanduser()),
        "cache_dir": str(Path(args.cache_dir).expanduser()),
        "out_dir": str(out / "runs"),
        "epochs": args.epochs,
        "steps": args.steps,
        "flop_batches": args.flop_batches,
    }
    result = {
        "recipe": Path(args.recipe).name,
        "data_root": spec["data_root"],
        "commit": code_version(),
        "profile": profile(spec, args.repeats),
    }
    atomic_write_text(out / "profile.json", json.dumps(result, indent=1))
    atomic_write_text(out / "profile.md", markdown(result))
    print(markdown(result), end="")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
