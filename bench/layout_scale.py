#!/usr/bin/env python3
"""Layout scaling benchmark: load, train, validate and predict on release-size synthetic sets.

    .venv/bin/python bench/layout_scale.py --work /tmp/layscale \\
        --collections xla:default --sizes eighth --repeats 1
    .venv/bin/python bench/layout_scale.py --work /tmp/layscale --sizes eighth,quarter,half,full

For each collection and size, the set is generated once (`data/make_synthetic.py
--collection layout --preset release[_half|_quarter|_eighth]`, data/README.md) into
`<work>/data/` and reused afterwards. Then, each in a fresh process whose wall time and
peak RSS are measured (`--repeats` times, medians):

- cold load (empty cache folder) and warm load of train/valid/test through the layout
  cache (`load_layout_split(..., cache_dir=)`), and the cache's size on disk;
- a 2-epoch training run (`layout_train.py --epochs=2`, warm cache) of the baseline
  recipe (configs/layout/baseline.flags) and of the recommended one
  (configs/layout/recommended.flags), on every configuration of every graph. From
  the run file's per-epoch timings: the first epoch (it traces the train step) and
  the steady one (the second), each its training steps, per-epoch validation and
  end-of-epoch callbacks; and the final validation (every configuration of every
  valid graph ranked once, after the last epoch). A full run is extrapolated as the
  2-epoch run's wall time + the steady epoch x (the recipe's epochs - 2): the load,
  the tracing and the final validation are paid once;
- validation of the trained model on the valid split, timed in-process: scoring
  1,000-config subsets of every graph (`max_configs=1000` at load) and scoring every
  configuration (load, scoring and Kendall's tau each); and `layout_evaluate.py`
  end to end (it scores every configuration once and reports both);
- prediction of the whole test split end to end (`layout_gen_predictions_csv.py`,
  read from the .npz files, no cache).

With two or more sizes, the growth exponent k of every figure of a collection
(figure ∝ size^k, size = Σ kept nodes x configurations over the three splits, kept
nodes after the recommended recipe's 1-hop pruning). Writes `<work>/layout_scale.json`
and `<work>/layout_scale.md` (after every collection and size), with two sizes or more
`<work>/layout_scale_growth.png`, and prints the targets as met or missed. Targets are
judged at the real release's graph count: figures below full size are extrapolated in
the graph count (`at_release`) and marked. `--nlp_configs=real` gives the nlp sets the
real release's configurations per graph.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import run_bench  # a fresh process per step, its wall time and peak RSS
from bench_common import SIZE_ORDER, SIZES, code_version, dir_mb, fmt, growth_exponents, medians

from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.core.io_utils import atomic_write_text
from synthetic.layout.release import RELEASE_COUNTS, parse_nlp_configs

COLLECTIONS = ("xla:random", "xla:default", "nlp:random", "nlp:default")
SPLITS = ("train", "valid", "test")
RECIPES = {
    "baseline": ROOT / "configs" / "layout" / "baseline.flags",
    "recommended": ROOT / "configs" / "layout" / "recommended.flags",
}
# --nlp_configs=real: the real release's nlp train/valid configurations per graph, about
# 56,000 (default) and 66,000 (random) on average.
REAL_NLP_CONFIGS = {"nlp:default": "53000,59000", "nlp:random": "63000,69000"}
SUBSET_SIZE = 1000
TRAIN_EPOCHS = 2  # of the timed training run: its second epoch is a steady one
GB = 1000.0  # MB per GB in the targets

TARGET_TRAIN_RSS_MB = 8 * GB
TARGET_PREDICT_RSS_MB = 4 * GB
TARGET_PREDICT_S = 60.0
TARGET_SUBSET_VALIDATION_S = 60.0
TARGET_RECOMMENDED_TRAIN_S = 3600.0
TARGET_CACHES_MB = 4 * GB  # the four collections' caches together
TARGET_MAX_GROWTH = 1.1  # "no faster than linear", with room for timing noise


# ---------------------------------------------------------------------------
# Pure parts: recipes, log parsing, extrapolation, figures, growth, targets.


def recipe_flags(name: str) -> list[str]:
    """layout_train.py flags of a recipe."""
    return [f"--flagfile={RECIPES[name]}"]


def nlp_configs_of(value: str | None, collection: str) -> str | None:
    """make_synthetic's --nlp_configs for one collection: None off nlp, "real" per search."""
    if value is None or not collection.startswith("nlp:"):
        return None
    return REAL_NLP_CONFIGS[collection] if value == "real" else value


def recipe_epochs(path: Path) -> int:
    """The --epochs of a flag file."""
    for line in path.read_text().splitlines():
        if line.strip().startswith("--epochs="):
            return int(line.strip().split("=", 1)[1])
    raise PipelineError(f"{path}: no --epochs line")


def parse_train_log(stdout: str) -> str:
    """The "saved model:" folder of layout_train.py's output."""
    saved = re.search(r"^saved model: (.+)$", stdout, re.M)
    if not saved:
        raise PipelineError(f"layout_train.py output not understood: {stdout[-300:]}")
    return saved.group(1).strip()


def epoch_seconds(timings: dict) -> list[float]:
    """Each epoch's wall seconds from a run record's `timings` (keras_fit.EpochTimer):
    its training steps + its per-epoch validation + the end-of-epoch callbacks."""
    parts = ("epoch_train_s", "epoch_val_s", "epoch_callbacks_s")
    if any(p not in timings for p in parts):
        raise PipelineError(f"run record without per-epoch timings: {sorted(timings)}")
    return [sum(t) for t in zip(*(timings[p] for p in parts), strict=True)]


def extrapolated_training_s(
    run_wall_s: float, steady_epoch_s: float, epochs: int, epochs_run: int = TRAIN_EPOCHS
) -> float:
    """A full run's wall time from a short one: its wall time + the epochs it did not run.

    The short run paid the load, the tracing (in its first epoch) and the final
    validation once, as the full run does; each further epoch costs a steady one.
    """
    return run_wall_s + steady_epoch_s * max(epochs - epochs_run, 0)


def figures(r: dict) -> dict[str, float]:
    """Every figure of one collection and size, by row label (what the growth fit runs over)."""
    load = r["load"]
    out = {
        "cold load s (3 splits)": load["cold_load_s"],
        "warm load s (3 splits)": load["warm_load_s"],
        "cache on disk MB": load["cache_mb"],
        "cold load peak RSS MB": load["cold_load_rss_mb"],
        "warm load peak RSS MB": load["warm_load_rss_mb"],
    }
    for name, t in r.get("train", {}).items():
        if "failed" in t:
            continue
        run = f"{name} {TRAIN_EPOCHS}-epoch run"
        out[f"{run}: first epoch s"] = t["first_epoch_s"]
        out[f"{run}: steady epoch s"] = t["steady_epoch_s"]
        out[f"{run}: final validation s"] = t["final_validation_s"]
        out[f"{run}: wall s"] = t["wall_s"]
        out[f"{run}: peak RSS MB"] = t["peak_rss_mb"]
        out[f"{name} full run s (extrapolated)"] = t["full_run_s"]
    for name, v in r.get("validate", {}).items():
        if "failed" in v:
            continue
        out[f"{name} validate 1,000-config subsets: s"] = v["subset_s"]
        out[f"{name} validate 1,000-config subsets: peak RSS MB"] = v["subset_rss_mb"]
        out[f"{name} validate all configs: s"] = v["all_s"]
        out[f"{name} validate all configs: peak RSS MB"] = v["all_rss_mb"]
        out[f"{name} layout_evaluate.py: wall s"] = v["evaluate_wall_s"]
        out[f"{name} layout_evaluate.py: peak RSS MB"] = v["evaluate_rss_mb"]
    for name, p in r.get("predict", {}).items():
        if "failed" in p:
            continue
        out[f"{name} predict test: wall s"] = p["wall_s"]
        out[f"{name} predict test: peak RSS MB"] = p["peak_rss_mb"]
    return out


def growth(by_size: dict[str, dict]) -> dict[str, float]:
    """k of every figure of one collection measured at two sizes or more (size: node_configs)."""
    sizes = [s for s in SIZE_ORDER if s in by_size]
    return growth_exponents(
        [by_size[s]["load"]["node_configs"] for s in sizes], [figures(by_size[s]) for s in sizes]
    )


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def release_graphs(collection: str) -> int:
    """Graphs of the real release's three splits of a collection."""
    return sum(RELEASE_COUNTS[collection].values())


def at_release(collection: str, by_size: dict[str, dict]) -> tuple[dict[str, float], str]:
    """Every figure at the real release's graph count, and where it comes from.

    Measured at `full`, it is the measurement. Otherwise it is extrapolated in the
    graph count, in which the layout figures grew linearly: from two sizes or more,
    the line through the two largest; from one, proportionally (an upper bound for
    what has a fixed part, such as peak RSS).
    """
    sizes = [s for s in SIZE_ORDER if s in by_size]
    if "full" in by_size:
        return figures(by_size["full"]), "full, measured"
    target = release_graphs(collection)
    points = [(by_size[s]["load"]["graphs"], figures(by_size[s])) for s in sizes[-2:]]
    (g2, top) = points[-1]
    if len(points) == 1 or points[0][0] == g2:
        scaled = {k: v * target / g2 for k, v in top.items()}
        return scaled, f"1x extrapolated: {sizes[-1]} x {target / g2:.2f} graphs"
    g1, low = points[0]
    scaled = {k: v + (v - low[k]) * (target - g2) / (g2 - g1) for k, v in top.items() if k in low}
    return scaled, f"1x extrapolated: line through {sizes[-2]} and {sizes[-1]}"


def targets(results: dict[str, dict[str, dict]]) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) rows, per collection at the real release's size.

    `results[collection][size]` as the benchmark writes them; figures not measured
    at full size are extrapolated in the graph count (`at_release`), and say so.
    """
    rows = []
    caches: dict[str, float] = {}
    for collection, by_size in results.items():
        sizes = [s for s in SIZE_ORDER if s in by_size]
        if not sizes:
            continue
        r = by_size[sizes[-1]]
        one, how = at_release(collection, by_size)
        at = f"{collection}, {how}"
        caches[collection] = one["cache on disk MB"]
        for step in ("train", "predict"):
            for name, v in r.get(step, {}).items():
                if "failed" in v:
                    rows.append((f"{name} {step} ({at})", "failed: " + v["failed"][-120:], "n/a"))
        for name in r.get("train", {}):
            rss = one.get(f"{name} {TRAIN_EPOCHS}-epoch run: peak RSS MB")
            if rss is not None:
                label = f"{name} training peak RSS <= 8 GB ({at})"
                rows.append((label, f"{rss / GB:.2f} GB", _verdict(rss <= TARGET_TRAIN_RSS_MB)))
        for name in r.get("predict", {}):
            rss = one.get(f"{name} predict test: peak RSS MB")
            wall = one.get(f"{name} predict test: wall s")
            if rss is None or wall is None:
                continue
            rows.append(
                (
                    f"{name} prediction peak RSS <= 4 GB ({at})",
                    f"{rss / GB:.2f} GB",
                    _verdict(rss <= TARGET_PREDICT_RSS_MB),
                )
            )
            rows.append(
                (
                    f"{name} prediction of the test split <= 60 s ({at})",
                    f"{wall:.1f} s",
                    _verdict(wall <= TARGET_PREDICT_S),
                )
            )
        for name in r.get("validate", {}):
            subset = one.get(f"{name} validate 1,000-config subsets: s")
            if subset is not None:
                rows.append(
                    (
                        f"{name} validation on 1,000-config subsets <= 60 s ({at})",
                        f"{subset:.1f} s",
                        _verdict(subset <= TARGET_SUBSET_VALIDATION_S),
                    )
                )
        full = one.get("recommended full run s (extrapolated)")
        if full is not None:
            epochs = r["train"]["recommended"]["epochs"]
            rows.append(
                (
                    f"full recommended training <= 1 h ({at}; {epochs} epochs from {TRAIN_EPOCHS})",
                    f"{full / 3600:.2f} h",
                    _verdict(full <= TARGET_RECOMMENDED_TRAIN_S),
                )
            )
        k = growth(by_size)
        label = f"no figure grows faster than linearly, k <= {TARGET_MAX_GROWTH} ({collection})"
        if not k:
            rows.append((label, "needs 2 sizes", "n/a"))
        else:
            worst = max(k, key=k.get)
            rows.append(
                (label, f"max k {k[worst]:.2f} ({worst})", _verdict(k[worst] <= TARGET_MAX_GROWTH))
            )
    label = "the four collections' caches together <= 4 GB at 1x"
    if set(caches) == set(COLLECTIONS):
        total = sum(caches.values())
        rows.append((label, f"{total / GB:.2f} GB", _verdict(total <= TARGET_CACHES_MB)))
    else:
        rows.append((label, f"{len(caches)} of 4 collections measured", "n/a"))
    return rows


def markdown(result: dict) -> str:
    """The tables of layout_scale.md: figures per collection and size, then the targets."""
    lines = [
        f"Machine: {result['machine']}; code {result['code']}; {result['repeats']} repeat(s), "
        f"medians; seed {result['seed']}. Synthetic release-size layout sets "
        "(data/make_synthetic.py --collection layout). Size = Σ kept nodes x configurations "
        "(3 splits, 1-hop pruned)."
        + (
            f" nlp train/valid configurations per graph: {result['nlp_configs']}."
            if result.get("nlp_configs")
            else ""
        )
        + f" Search space: {result.get('search_space', 'permutations')}.",
    ]
    for collection, by_size in result["results"].items():
        sizes = [s for s in SIZE_ORDER if s in by_size]
        k = growth(by_size)
        one, how = at_release(collection, by_size)
        mark = "" if "full" in by_size else "*"
        lines += [
            "",
            f"**{collection}**" + (f" (\\* {how})" if mark else ""),
            "",
            "| figure | " + " | ".join(sizes) + " | 1x | growth k |",
            "|---|" + "---|" * len(sizes) + "---|---|",
        ]
        cells = " | ".join(
            f"{by_size[s]['load']['graphs']} / {by_size[s]['load']['configs'] / 1e3:.0f}k"
            for s in sizes
        )
        lines.append(f"| graphs / configs (3 splits) | {cells} | {release_graphs(collection)} | |")
        cells = " | ".join(f"{by_size[s]['load']['node_configs'] / 1e6:.1f}M" for s in sizes)
        lines.append(f"| kept nodes x configs | {cells} | | |")
        table = {s: figures(by_size[s]) for s in sizes}
        for label in dict.fromkeys(label for s in sizes for label in table[s]):
            cells = " | ".join(fmt(table[s][label]) if label in table[s] else "-" for s in sizes)
            cells += f" | {fmt(one[label])}{mark}" if label in one else " | -"
            lines.append(f"| {label} | {cells} | {f'{k[label]:.2f}' if label in k else ''} |")
        for s in sizes:
            for step in ("train", "validate", "predict"):
                for name, v in by_size[s].get(step, {}).items():
                    if "failed" in v:
                        lines.append(f"| {name} {step} ({s}) | failed: {v['failed'][-160:]} | |")
    lines += ["", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in targets(result["results"])]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Child processes (measured through run_bench.measure).

LOAD_SNIPPET = """
import sys, time, json
sys.path.insert(0, {root!r})
from baselines.layout.data import load_layout_split
t = time.perf_counter()
graphs = [g for s in {splits!r} for g in load_layout_split(
    {data!r} + "/" + s, log=None, cache_dir={cache!r})]
print(json.dumps({{"seconds": time.perf_counter() - t, "graphs": len(graphs),
                   "configs": int(sum(g.num_configs for g in graphs))}}))
"""


def _validate_child(spec_json: str) -> int:
    """Scores the valid split with a saved model (all or `max_configs` configs); prints JSON."""
    from baselines.core.startup import prepare_tensorflow_import

    prepare_tensorflow_import()
    spec = json.loads(spec_json)
    started = time.perf_counter()
    import numpy as np

    from baselines.layout.batching import prepare_graphs
    from baselines.layout.layout_args import LayoutTrainArgs
    from baselines.layout.metrics import kendall_tau
    from baselines.layout.run_data import load_run_split, read_layout_models, restore_layout_model
    from baselines.layout.scoring import GraphScorer

    (model_dir, record), *_ = read_layout_models(spec["model_dir"], "--dir")
    hops = LayoutTrainArgs.from_dict(record["args"]).prune_hops
    subset = spec["max_configs"]
    graphs = load_run_split(
        Path(spec["folder"]),
        training=subset is not None,  # max_configs applies to training loads only
        prune_hops=hops,
        max_configs=subset,
        seed=0,
        log=None,
        cache_dir=spec["cache_dir"],
    )
    scorer = GraphScorer(restore_layout_model(model_dir, record))
    taus = [
        kendall_tau(scorer.score(p), np.asarray(g.config_runtime))
        for g, p in zip(graphs, prepare_graphs(graphs), strict=True)
    ]
    print(
        json.dumps(
            {
                "seconds": time.perf_counter() - started,
                "configs": int(sum(g.num_configs for g in graphs)),
                "kendall_tau": float(np.nanmean(taus)),
            }
        )
    )
    return 0


# ---------------------------------------------------------------------------
# Steps.


def generate(
    work: Path,
    collection: str,
    size: str,
    seed: int,
    nlp_configs: str | None = None,
    search_space: str = "permutations",
) -> tuple[Path, float | None]:
    """The data root of one collection and size (generated once, marked by its parameters).

    `nlp_configs` ("LOW,HIGH", nlp collections only) and `search_space` are make_synthetic's.
    """
    tag = f"{SIZES[size]}_s{seed}_{collection.replace(':', '_')}"
    params = {"preset": SIZES[size], "seed": seed, "collection": collection}
    if search_space != "permutations":
        tag += f"_{search_space}"
        params["search_space"] = search_space
    if nlp_configs is not None and collection.startswith("nlp:"):
        tag += f"_c{nlp_configs.replace(',', '-')}"
        params["nlp_configs"] = nlp_configs
    root, marker = work / "data" / tag, work / "data" / f"{tag}.json"
    if marker.is_file() and json.loads(marker.read_text()) == params and root.is_dir():
        return root, None
    cmd = [sys.executable, str(ROOT / "data" / "make_synthetic.py"), "--collection=layout"]
    cmd += [f"--preset={SIZES[size]}", f"--collections={collection}", f"--seed={seed}"]
    cmd += [f"--out={root}", "--quiet"]
    if "nlp_configs" in params:
        cmd.append(f"--nlp_configs={nlp_configs}")
    if "search_space" in params:
        cmd.append(f"--search_space={search_space}")
    print(f"generating {root} ...", flush=True)
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=run_bench.ENV, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PipelineError(f"generating {root} failed: {proc.stderr.strip()[-300:]}")
    print(proc.stdout.strip(), flush=True)
    atomic_write_text(marker, json.dumps(params))
    return root, time.perf_counter() - started


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def kept_node_configs(folder: Path, cache: Path) -> int:
    """Σ kept nodes x configurations over the three splits (1-hop pruning, warm cache)."""
    from baselines.layout.run_data import load_run_split

    return sum(
        g.num_nodes * g.num_configs
        for split in SPLITS
        for g in load_run_split(
            folder / split, training=False, prune_hops=1, log=None, cache_dir=cache
        )
    )


def bench_load(folder: Path, work: Path, repeats: int) -> tuple[dict, Path]:
    """Cold and warm load of the three splits; returns figures and the last cache folder."""
    runs, cache = [], work / "cache_0"
    for r in range(repeats):
        if cache.exists():
            shutil.rmtree(cache)
        cache = work / f"cache_{r}"
        snippet = LOAD_SNIPPET.format(
            root=str(ROOT), splits=SPLITS, data=str(folder), cache=str(cache)
        )
        cold = run_bench.measure([sys.executable, "-c", snippet], work)
        warm = run_bench.measure([sys.executable, "-c", snippet], work)
        info = _last_json(warm["stdout"])
        runs.append(
            {
                "cold_load_s": _last_json(cold["stdout"])["seconds"],
                "cold_load_rss_mb": cold["peak_rss_mb"],
                "warm_load_s": info["seconds"],
                "warm_load_rss_mb": warm["peak_rss_mb"],
                "cache_mb": dir_mb(cache),
                "graphs": info["graphs"],
                "configs": info["configs"],
            }
        )
    return medians(runs), cache


def bench_train(
    name: str, collection: str, data_root: Path, cache: Path, work: Path, repeats: int
) -> dict:
    """A 2-epoch run of a recipe in a fresh process; the model folder of the first run."""
    from baselines.layout.run_data import read_layout_run

    source, search = collection.split(":")
    epochs = recipe_epochs(RECIPES[name])
    runs, model_dir = [], ""
    for r in range(repeats):
        cmd = [sys.executable, str(ROOT / "layout_train.py"), *recipe_flags(name)]
        cmd += [f"--data_root={data_root}", f"--source={source}", f"--search={search}"]
        cmd += [f"--epochs={TRAIN_EPOCHS}", f"--cache_dir={cache}"]
        cmd += [f"--out_dir={work / f'train_{name}_{r}'}"]
        res = run_bench.measure(cmd, work)
        folder = parse_train_log(res["stdout"])
        model_dir = model_dir or folder
        timings = read_layout_run(Path(folder))["timings"]
        first, *_, steady = epoch_seconds(timings)
        runs.append(
            {
                "wall_s": res["wall_s"],
                "peak_rss_mb": res["peak_rss_mb"],
                "first_epoch_s": first,
                "steady_epoch_s": steady,
                "final_validation_s": timings["val_eval_s"],
                "full_run_s": extrapolated_training_s(res["wall_s"], steady, epochs),
            }
        )
    return dict(medians(runs), epochs=epochs, model_dir=model_dir)


def bench_validate(model_dir: str, folder: Path, cache: Path, work: Path, repeats: int) -> dict:
    """In-process timing of subset and all-config scoring, and layout_evaluate.py end to end."""
    runs = []
    for r in range(repeats):
        run = {}
        for key, max_configs in (("subset", SUBSET_SIZE), ("all", None)):
            spec = {
                "model_dir": model_dir,
                "folder": str(folder / "valid"),
                "cache_dir": str(cache),
                "max_configs": max_configs,
            }
            res = run_bench.measure(
                [sys.executable, __file__, "--_validate", json.dumps(spec)], work
            )
            info = _last_json(res["stdout"])
            run[f"{key}_s"] = info["seconds"]
            run[f"{key}_wall_s"] = res["wall_s"]
            run[f"{key}_rss_mb"] = res["peak_rss_mb"]
            run[f"{key}_tau"] = info["kendall_tau"]
        cmd = [sys.executable, str(ROOT / "layout_evaluate.py"), f"--dirs={model_dir}"]
        cmd += [f"--data_root={folder.parents[1]}", f"--cache_dir={cache}", "--split=valid"]
        cmd += [f"--subset_size={SUBSET_SIZE}", f"--output={work / f'evaluation_{r}'}"]
        res = run_bench.measure(cmd, work)
        run["evaluate_wall_s"], run["evaluate_rss_mb"] = res["wall_s"], res["peak_rss_mb"]
        runs.append(run)
    return medians(runs)


def bench_predict(model_dir: str, data_root: Path, work: Path, repeats: int) -> dict:
    """layout_gen_predictions_csv.py on the whole test split, from the .npz files (no cache)."""
    runs = []
    for r in range(repeats):
        cmd = [sys.executable, str(ROOT / "layout_gen_predictions_csv.py"), f"--dir={model_dir}"]
        cmd += [f"--data_root={data_root}", f"--output={work / f'predictions_{r}.csv'}"]
        res = run_bench.measure(cmd, work)
        runs.append({"wall_s": res["wall_s"], "peak_rss_mb": res["peak_rss_mb"]})
    return medians(runs)


def _recorded(result: dict, step: str, name: str, call) -> dict | None:
    """Runs one step; a failure is recorded (and printed), and the benchmark goes on."""
    try:
        value = call()
    except PipelineError as e:
        result[step][name] = {"failed": str(e)[-300:]}
        print(json.dumps({step: {name: result[step][name]}}), flush=True)
        return None
    result[step][name] = value
    print(json.dumps({step: {name: value}}), flush=True)
    return value


def bench_one(collection: str, size: str, args: argparse.Namespace, work: Path) -> dict:
    """Every step of one collection at one size."""
    nlp_configs = nlp_configs_of(args.nlp_configs, collection)
    data_root, gen_s = generate(work, collection, size, args.seed, nlp_configs, args.search_space)
    folder = data_root / Path(*collection.split(":"))
    scratch = work / "runs" / f"{collection.replace(':', '_')}_{size}"
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    result: dict = {"preset": SIZES[size], "data_root": str(data_root), "generate_s": gen_s}
    result["load"], cache = bench_load(folder, scratch, args.repeats)
    result["load"]["node_configs"] = kept_node_configs(folder, cache)
    print(json.dumps({f"{collection} {size}": {"load": result["load"]}}), flush=True)
    result["train"], result["validate"], result["predict"] = {}, {}, {}
    for name in args.recipes.split(","):
        t = _recorded(
            result,
            "train",
            name,
            lambda name=name: bench_train(
                name, collection, data_root, cache, scratch, args.repeats
            ),
        )
        if t is None:
            continue
        model_dir = t.pop("model_dir")
        _recorded(
            result,
            "validate",
            name,
            lambda model_dir=model_dir: bench_validate(
                model_dir, folder, cache, scratch, args.repeats
            ),
        )
        _recorded(
            result,
            "predict",
            name,
            lambda model_dir=model_dir: bench_predict(model_dir, data_root, scratch, args.repeats),
        )
    if not args.keep_runs:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def growth_plot(results: dict[str, dict[str, dict]]):
    """The figure of layout_scale_growth.png: the first collection with two sizes or more."""
    import bench_figures

    for collection, by_size in results.items():
        k = growth(by_size)
        if not k:
            continue
        sizes = [s for s in SIZE_ORDER if s in by_size]
        table = {s: figures(by_size[s]) for s in sizes}
        series = {label: [table[s][label] for s in sizes] for label in k}
        units = {label: "MB" if "MB" in label else "s" for label in series}
        x = [by_size[s]["load"]["node_configs"] for s in sizes]
        return bench_figures.growth_figure(
            x, series, units, f"{collection}: kept nodes x configurations"
        )
    return None


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--_validate":
        return _validate_child(sys.argv[2])
    parser = entry_parser(__doc__)
    parser.add_argument(
        "--collections", default=",".join(COLLECTIONS), help="comma-separated, default all four"
    )
    parser.add_argument(
        "--sizes", default="eighth", help="comma-separated, of eighth, quarter, half, full (1x)"
    )
    parser.add_argument("--work", default=str(ROOT / "out" / "layout_scale"), help="sets, runs")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each step (medians)")
    parser.add_argument("--seed", type=int, default=0, help="data set seed")
    parser.add_argument(
        "--recipes", default="baseline,recommended", help="baseline and/or recommended"
    )
    parser.add_argument("--keep_runs", action="store_true", help="keep caches and models")
    parser.add_argument(
        "--nlp_configs",
        default=None,
        metavar="LOW,HIGH|real",
        help="nlp configurations per train/valid graph (make_synthetic's --nlp_configs; "
        "default its 9000,11000; real: 53000,59000 on nlp:default and 63000,69000 on "
        "nlp:random, the real release's 56,000 and 66,000 on average)",
    )
    parser.add_argument(
        "--search_space",
        default="permutations",
        choices=("permutations", "decisions"),
        help="make_synthetic's --search_space: each layout group free, or groups tied into a "
        "few decisions as in the real files (a node then has few distinct layout rows)",
    )
    args = parser.parse_args()
    collections = [c.strip() for c in args.collections.split(",")]
    sizes = [s.strip() for s in args.sizes.split(",")]
    bad = [c for c in collections if c not in COLLECTIONS] + [s for s in sizes if s not in SIZES]
    bad += [r for r in args.recipes.split(",") if r not in RECIPES]
    if bad:
        raise PipelineError(
            f"unknown {', '.join(bad)}: collections {COLLECTIONS}, sizes {SIZE_ORDER}, "
            f"recipes {tuple(RECIPES)}"
        )
    if args.repeats < 1:
        raise PipelineError(f"--repeats: must be at least 1, got {args.repeats}")
    if args.nlp_configs != "real":
        parse_nlp_configs(args.nlp_configs)  # a bad value is one line before anything runs
    work = Path(args.work).expanduser().resolve()
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {
        "machine": f"{os.cpu_count()} cores, {run_bench._mem_gb():.0f} GiB",
        "repeats": args.repeats,
        "seed": args.seed,
        "nlp_configs": args.nlp_configs,
        "search_space": args.search_space,
        "code": code_version(),
        "results": {},
    }
    for collection in collections:
        for size in sorted(set(sizes), key=SIZE_ORDER.index):
            by_size = result["results"].setdefault(collection, {})
            by_size[size] = bench_one(collection, size, args, work)
            result["growth"] = {c: growth(b) for c, b in result["results"].items()}
            atomic_write_text(work / "layout_scale.json", json.dumps(result, indent=1) + "\n")
            atomic_write_text(work / "layout_scale.md", markdown(result))
            figure = growth_plot(result["results"])
            if figure is not None:
                from baselines.core.plots import save_png

                save_png(figure, work / "layout_scale_growth.png")
    print(markdown(result))
    for target, measured, verdict in targets(result["results"]):
        print(f"{verdict}: {target}: {measured}")
    return 0


if __name__ == "__main__":
    run_cli(main)
