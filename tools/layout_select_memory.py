#!/usr/bin/env python3
"""Peak memory of loading, reducing and preparing a cached layout split.

    python tools/layout_select_memory.py --out /tmp/laymem              # this checkout
    python tools/layout_select_memory.py --out /tmp/laymem --code DIR  # DIR/baselines

Writes a synthetic train split of large graphs under `<out>/layout/xla/default/train`
(`--graphs` files of `--configs` configurations of `--configurable` configurable
nodes each, 10% of them repeats, stored as int8), builds its cache under
`<out>/cache` in a first process, then in a fresh process loads it warm, drops
duplicates, samples `--max_configs`, prunes to the 1-hop neighbourhood and
prepares the graphs, and prints one JSON line: the process's peak RSS (VmHWM),
its peak anonymous RSS (sampled every millisecond: memory the process holds,
not the cache's file pages, which the kernel may drop at any time), the
anonymous RSS once done, and the RSS after the imports (TensorFlow), all in MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def write_split(folder: Path, graphs: int, configs: int, configurable: int) -> None:
    """`graphs` layout files of int8 configurations, 10% of them repeats of others."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(graphs):
        path = folder / f"big_{i}.npz"
        if path.exists():
            continue
        rng = np.random.default_rng(i)
        n = configurable * 2
        feat = rng.integers(-1, 5, size=(configs, configurable, 18), dtype=np.int8)
        repeats = rng.choice(configs, size=configs // 10, replace=False)
        feat[repeats] = feat[rng.integers(0, configs, size=repeats.size)]
        np.savez(
            path,
            node_feat=rng.random((n, 140), dtype=np.float32),
            node_opcode=rng.integers(0, 100, n).astype(np.int32),
            edge_index=np.stack([np.arange(1, n), np.arange(n - 1)], axis=1).astype(np.int64),
            node_config_ids=np.arange(0, n, 2, dtype=np.int64),
            node_config_feat=feat,
            config_runtime=rng.integers(1_000, 2_000, configs).astype(np.int64),
            node_splits=np.array([[0, n]], np.int64),
        )


def _status(field: str) -> float:
    """A /proc/self/status memory line, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(folder: Path, cache: Path, max_configs: int) -> dict[str, float]:
    """Loads, reduces and prepares the cached split; the memory figures (module docstring)."""
    from baselines.layout.batching import prepare_graphs
    from baselines.layout.run_data import load_run_split

    start, start_anon = _status("VmRSS"), _status("RssAnon")
    peak_anon = [_status("RssAnon")]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak_anon[0] = max(peak_anon[0], _status("RssAnon"))
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    clock = time.perf_counter()
    graphs = load_run_split(
        folder,
        training=True,
        prune_hops=1,
        drop_duplicates=True,
        max_configs=max_configs,
        seed=0,
        log=None,
        cache_dir=cache,
    )
    prepared = prepare_graphs(graphs)
    seconds = time.perf_counter() - clock
    done.set()
    sampler.join()
    return {
        "graphs": len(prepared),
        "configs_kept": sum(g.num_configs for g in prepared),
        "seconds": round(seconds, 1),
        "rss_after_imports_mb": round(start),
        "anon_after_imports_mb": round(start_anon),
        "peak_rss_mb": round(_status("VmHWM")),
        "peak_anon_mb": round(max(peak_anon[0], _status("RssAnon"))),
        "anon_after_mb": round(_status("RssAnon")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--code", type=Path, default=REPO, help="checkout whose baselines/ runs")
    parser.add_argument("--graphs", type=int, default=3)
    parser.add_argument("--configs", type=int, default=12_000)
    parser.add_argument("--configurable", type=int, default=800)
    parser.add_argument("--max_configs", type=int, default=1000)
    parser.add_argument("--_measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    folder, cache = args.out / "layout" / "xla" / "default" / "train", args.out / "cache"
    if args._measure:
        sys.path.insert(0, str(args.code))
        print(json.dumps(measure(folder, cache, args.max_configs)))
        return
    write_split(folder, args.graphs, args.configs, args.configurable)
    env = {**os.environ, "PYTHONPATH": str(args.code), "TF_CPP_MIN_LOG_LEVEL": "3"}
    build = (
        "from baselines.layout.data import load_layout_split as f; f(%r, log=None, cache_dir=%r)"
    )
    build %= (str(folder), str(cache))
    subprocess.run([sys.executable, "-c", build], env=env, check=True)
    flags = [f"--out={args.out}", f"--code={args.code}", f"--max_configs={args.max_configs}"]
    subprocess.run([sys.executable, __file__, *flags, "--_measure"], env=env, check=True)


if __name__ == "__main__":
    main()
