#!/usr/bin/env python3
"""A layout recipe's training step, timed in one process: batch assembly and the compiled step.

    D=/work/layprobe/data/release_eighth_s0_nlp_default   # a set bench/layout_scale.py wrote
    .venv/bin/python bench/layout_step.py --data_root $D --cache_dir /tmp/stepcache

Reads the train split as the recipe's run does (through `--cache_dir` when given),
draws the recipe's training batches (epoch 0, segment training as the recipe says),
builds its model and optimizer as the conductor does, then runs `--warmup` steps
(tracing) and times `--steps` more, one compiled step per call, each synchronised
on its loss. Prints one JSON line: the median assembly and step milliseconds and
the steps timed. Run it in two checkouts to compare them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_root", required=True)
    parser.add_argument("--source", default="nlp")
    parser.add_argument("--search", default="default")
    parser.add_argument("--flagfile", default="configs/layout/recommended.flags")
    parser.add_argument("--max_configs", default="1000")
    parser.add_argument("--cache_dir", default=None)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    opts = parser.parse_args()

    from baselines.core.startup import prepare_tensorflow_import

    prepare_tensorflow_import()
    import tensorflow as tf

    import layout_train
    from baselines.core import metrics
    from baselines.core.keras_fit import RankingTrainer, capped_configs, compile_trainer
    from baselines.core.runner import set_determinism
    from baselines.layout.batching import to_tensors
    from baselines.layout.task import LayoutTask, load_train_graphs, prepared

    argv = [f"--flagfile={opts.flagfile}", f"--data_root={opts.data_root}"]
    argv += [f"--source={opts.source}", f"--search={opts.search}"]
    argv += [f"--max_configs={opts.max_configs}"]
    argv += [f"--cache_dir={opts.cache_dir}"] if opts.cache_dir else []
    args = layout_train.parse_args(argv)
    set_determinism(args.seed)
    quiet = lambda _: None  # noqa: E731
    folder = Path(opts.data_root).expanduser() / args.source / args.search
    train, valid = load_train_graphs(args, folder, quiet)
    task = LayoutTask()
    loaded = prepared(train, valid)
    configs = capped_configs(args.configs, task.most_configs(loaded), "graph", quiet)
    batches, _ = task.batches(args, loaded, configs, 1)
    model = task.build_model(args, configs)
    loss_fn = metrics.make_loss_fn(metrics.parse_losses(args.losses))
    trainer = RankingTrainer(model, loss_fn, configs, to_graph=task.to_model_inputs)
    compile_trainer(trainer, task.optimizer(args, args.epochs, batches.steps))
    trainer.optimizer.build(trainer.trainable_variables)
    # One trace for every batch shape, as the training loop's dataset gives.
    step = tf.function(trainer.train_step, input_signature=[batches.split.signature])

    assemble_ms, step_ms = [], []
    drawn = iter(batches.batches(0))
    for i in range(opts.warmup + opts.steps):
        started = time.perf_counter()
        try:
            batch = next(drawn)
        except StopIteration:
            drawn = iter(batches.batches(i))
            batch = next(drawn)
        tensors = to_tensors(batch)
        assembled = time.perf_counter()
        float(step(tensors)["loss"])
        done = time.perf_counter()
        if i >= opts.warmup:
            assemble_ms.append(1000 * (assembled - started))
            step_ms.append(1000 * (done - assembled))
    print(
        json.dumps(
            {
                "assemble_ms": round(statistics.median(assemble_ms), 2),
                "step_ms": round(statistics.median(step_ms), 2),
                "steps": len(step_ms),
                "configs": configs,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
