#!/usr/bin/env python3
"""The job's choice judged on test: does validation pick an option that holds on test?

    .venv/bin/python bench/choice_heldout.py --worlds all --size medium --seeds 3 --out out/choice
    .venv/bin/python bench/choice_heldout.py --kinds layout --layout_worlds permutations,decisions \
        --preset release_eighth --seeds 3 --out out/choice_layout
    .venv/bin/python bench/choice_heldout.py --kinds layout --layout_worlds permutations \
        --preset toy --seeds 2 --epochs 1 --out /tmp/choice_smoke   # a quick end-to-end check

For each tile world (`synthetic/tiles/worlds.py`), the one-command job
(`kaggle_submission.py --collections=tile:xla`) trains every candidate's seeds on
that world alone and chooses on its validation split, as it would on a user's
data; test runtimes stay hidden from it. Only then is the world's labelled test
split scored, for every option (each candidate's seed ensemble and the blend)
and for each seed alone. The table gives each option's test top-5 error, the
chosen option's, the best of baseline and recommended, and their seed spread
(the larger of the two candidates' std over seeds): the goal is that the chosen
option is never worse on test than that best by more than the spread.

Writes `<out>/choice.{json,md}`; runs stay in `<out>/jobs/<world>` and are reused.

`--kinds layout` (or `tile,layout`): the same judgement in the layout worlds
(`--layout_worlds`): `permutations` (configurations free) and `decisions`
(configurations tied into a few binary decisions, as the real files'), each a
set of all four layout collections from `bench/layout_quality.py`'s `generate`
(`--preset`, release-size graphs, standard cost model, `--layout_data_seed`,
test split labelled; `--preset toy`: its toy-size counts, permutations only).
The job (`--collections=layout:...` all four) runs on a data root whose
`npz/layout/<source>/<search>` folders link to the set's: it reads only the
train and valid runtimes (the choice is made on valid; test is only ranked).
Then each collection's test split is scored for every option and seed through
`core/rank_run.evaluate_run` with `LayoutRanking` (layout_evaluate.py's own
Request, split "test"), into `<out>/jobs/<world>/<slug>/test_evaluation_items.csv`.
An option's test figure is the mean over test graphs of Kendall's tau (higher
is better: the choice holds when the chosen option's tau is at least the best
candidate's minus the seed spread). Writes `<out>/choice_layout.{json,md}`, one
table per collection, one row per world. `--epochs` is given to every training
of the job (smoke runs).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import quality  # noqa: E402  (the worlds' sets, made once)

from baselines.core.io_utils import atomic_write_text  # noqa: E402
from baselines.core.rank_run import BLEND, read_items_csv  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")


def run(cmd: list[str], log: Path, name: str | None = None) -> float:
    """Runs a Python command, its output to `log`; its wall seconds."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run([sys.executable, *cmd], cwd=ROOT, env=ENV, stdout=f, stderr=f)
    if proc.returncode != 0:
        raise SystemExit(f"error: {name or cmd[0]} failed; see {log}")
    return time.perf_counter() - started


def job_flags(args) -> list[str]:
    """The job's flags every kind gets: seeds, --epochs (smoke runs), local workers."""
    return [
        f"--seeds={args.seeds}",
        *([f"--epochs={args.epochs}"] if args.epochs is not None else []),
        *([f"--direct_num_workers={args.workers}"] if args.workers else []),
    ]


def test_scores(collection: Path, output: Path, command) -> tuple[dict, dict, dict]:
    """(candidate: model folders, the job's `.done.json`, test figures per option and item) of
    one collection of a finished job: its test split scored by `command(dirs, groups_json)`
    into `<output>_items.csv`, once per set of models (reused while they are the same)."""
    done = json.loads((collection / ".done.json").read_text())
    groups = {name: sorted(dirs) for name, dirs in done["inputs"]["models"].items()}
    every = ",".join(sorted(d for dirs in groups.values() for d in dirs))
    items, marker = Path(f"{output}_items.csv"), Path(f"{output}_groups.json")
    if not (items.is_file() and marker.is_file() and json.loads(marker.read_text()) == groups):
        run(command(every, json.dumps(groups)), Path(f"{output}.log"), f"test scoring of {output}")
        atomic_write_text(marker, json.dumps(groups, indent=1) + "\n")
    return groups, done, read_items_csv(items)


def judge_world(args, world: str) -> dict:
    """The job on one world, then every option's test figures."""
    train_root, test_dir = quality.generate(Path(args.out), args.size, world, args.data_seed)
    data_root = Path(args.out) / "roots" / world
    link = data_root / "npz" / "tile" / "xla"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(train_root.absolute())
    job_out = Path(args.out) / "jobs" / world
    run(
        [
            "kaggle_submission.py", f"--data_root={data_root}", "--collections=tile:xla",
            f"--out={job_out}", f"--tile_candidates={args.candidates}", *job_flags(args),
        ],
        job_out / "job.log",
    )  # fmt: skip
    groups, done, items = test_scores(
        job_out / "tile_xla",
        job_out / "test_evaluation",
        lambda dirs, groups_json: [
            "tiles_evaluate.py", f"--dirs={dirs}", "--split=test",
            f"--data_root={test_dir.parent}", f"--groups_json={groups_json}",
            f"--output={job_out / 'test_evaluation'}",
        ],
    )  # fmt: skip
    # The item figure is 1 - the kernel's top-5 error.
    row = option_row(groups, done, items, lambda v: 1.0 - statistics.mean(v), lower_is_better=True)
    return {"world": world, **row}


def option_row(
    groups: dict, done: dict, items: dict, figure, lower_is_better: bool
) -> dict[str, Any]:
    """Each option's and each seed's test figure (`figure` of its per-item values), the seed
    spread (the larger of the candidates' population std over seeds), and whether the choice
    holds: the chosen option no worse than the best candidate by more than the spread."""
    seeds = {
        name: [figure(items[f"model {Path(d).name}"].values()) for d in dirs]
        for name, dirs in groups.items()
    }
    spread = max(statistics.pstdev(v) for v in seeds.values())
    test = {o: figure(items[o].values()) for o in [*groups, BLEND]}
    chosen = done["choice"]["chosen"]
    best = (min if lower_is_better else max)(test[o] for o in groups)
    holds = test[chosen] <= best + spread if lower_is_better else test[chosen] >= best - spread
    return {
        "test": test,
        "seeds": seeds,
        "spread": spread,
        "chosen": chosen,
        "reason": done["choice"]["reason"],
        "best_candidate": best,
        "holds": holds,
    }


def markdown(rows: list[dict], args) -> str:
    candidates = list(rows[0]["seeds"])
    head = " | ".join(f"{c} test top-5" for c in [*candidates, BLEND])
    lines = [
        f"| world | {head} | chosen on valid | chosen's test | best candidate's test | "
        "seed spread | holds |",
        "|" + "---|" * (len(candidates) + 7),
    ]
    for r in rows:
        cells = " | ".join(f"{r['test'][o]:.4f}" for o in [*candidates, BLEND])
        lines.append(
            f"| {r['world']}, {args.size} | {cells} | {r['chosen']} | "
            f"{r['test'][r['chosen']]:.4f} | {r['best_candidate']:.4f} | {r['spread']:.4f} | "
            f"{'yes' if r['holds'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Layout: the two search-space worlds, four collections each.

LAYOUT_WORLDS = {"permutations": "permutations", "decisions": "decisions"}  # world: search space
LAYOUT_COLLECTIONS = ("xla:default", "xla:random", "nlp:default", "nlp:random")
TOY = "toy"  # --preset toy: layout_quality's toy-size counts (permutations only)


def layout_set(args, world: str) -> tuple[Path, float]:
    """The world's generated layout set (test labelled), made once; and the seconds it took
    (0 when reused)."""
    import layout_quality

    out = Path(args.out)
    started = time.perf_counter()
    if args.preset == TOY:
        if world != "permutations":
            raise SystemExit(f"error: --preset toy has no {world} world (release-size sets only)")
        counts = layout_quality.parse_counts(layout_quality.DEFAULT_COUNTS)
        root = layout_quality.generate(out, "standard", counts, args.layout_data_seed)
    else:
        root = layout_quality.generate(
            out, "standard", None, args.layout_data_seed, args.preset, LAYOUT_COLLECTIONS,
            LAYOUT_WORLDS[world], progress=True,
        )  # fmt: skip
    return root, time.perf_counter() - started


def layout_data_root(args, world: str, set_root: Path) -> Path:
    """`<out>/roots/<world>`, whose `npz/layout/<source>/<search>` link to the set's folders."""
    data_root = Path(args.out) / "roots" / world
    for collection in LAYOUT_COLLECTIONS:
        source, search = collection.split(":")
        link = data_root / "npz" / "layout" / source / search
        target = (set_root / source / search).absolute()
        if link.is_symlink() and Path(os.readlink(link)) != target:
            link.unlink()  # another set (e.g. another preset) under the same out
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
    return data_root


def evaluate_layout_test(dirs: str, groups: str, data_root: str, cache_dir: str, output: str):
    """layout_evaluate.py's evaluation of the labelled test split (which its flags refuse):
    its own parser and Request, the split set to "test"; `<output>_items.csv` per option.
    Run in a child process (`layout_test_command`), as the job runs its evaluations."""
    import dataclasses

    import layout_evaluate
    from baselines.core.rank_run import Request, evaluate_run
    from baselines.layout.task import LayoutRanking

    flags = layout_evaluate.build_parser().parse_args(
        [
            f"--dirs={dirs}", f"--data_root={data_root}", f"--cache_dir={cache_dir}",
            f"--groups_json={groups}", f"--output={output}",
        ]
    )  # fmt: skip
    request = dataclasses.replace(Request.of(flags, "--dirs"), split="test")
    evaluate_run(LayoutRanking(), request, lambda line: print(line, flush=True))


def layout_test_command(job_out: Path, data_root: Path, output: Path):
    """`test_scores`'s command for a layout collection: `evaluate_layout_test` in a child."""
    code = (
        "import sys; sys.path.insert(0, 'bench'); import choice_heldout; "
        "choice_heldout.evaluate_layout_test(*sys.argv[1:])"
    )
    layout_root = str((data_root / "npz" / "layout").absolute())
    fixed = [layout_root, str(job_out / "cache" / "layout"), str(output)]
    return lambda dirs, groups_json: ["-c", code, dirs, groups_json, *fixed]


def mean_defined(values) -> float:
    """The mean of the finite figures (nan when none is), as the choice takes its means."""
    defined = [v for v in values if math.isfinite(v)]
    return statistics.mean(defined) if defined else float("nan")


def judge_layout_world(args, world: str, set_root: Path) -> list[dict]:
    """The job on one layout world's four collections, then every option's test tau."""
    data_root = layout_data_root(args, world, set_root)
    job_out = Path(args.out) / "jobs" / world
    collections = ",".join(f"layout:{c}" for c in LAYOUT_COLLECTIONS)
    job_s = run(
        [
            "kaggle_submission.py", f"--data_root={data_root}", f"--collections={collections}",
            f"--out={job_out}", f"--layout_candidates={args.layout_candidates}",
            *job_flags(args),
        ],
        job_out / "job.log",
    )  # fmt: skip
    print(f"{world}: job done in {job_s:.0f} s", flush=True)
    rows = []
    for collection in LAYOUT_COLLECTIONS:
        slug = "layout_" + collection.replace(":", "_")
        output = job_out / slug / "test_evaluation"
        groups, done, items = test_scores(
            job_out / slug, output, layout_test_command(job_out, data_root, output)
        )
        # The item figure is the graph's Kendall's tau.
        row = option_row(groups, done, items, mean_defined, lower_is_better=False)
        row["test_graphs"] = len(items[BLEND])
        rows.append({"world": world, "collection": collection, "set": str(set_root), **row})
        print(f"{world} {collection}: chose {row['chosen']}, holds: {row['holds']}", flush=True)
    return rows


def layout_markdown(rows: list[dict], args) -> str:
    """One table per collection, one row per world."""
    candidates = list(rows[0]["seeds"])
    options = [*candidates, BLEND]
    epochs = f", {args.epochs} epoch(s) per training" if args.epochs is not None else ""
    parts = [
        "# The job's layout choice judged on test",
        "",
        f"Layout sets of `bench/layout_quality.py` (preset {args.preset}, standard cost model, "
        f"data seed {args.layout_data_seed}); the job chose on valid with {args.seeds} seeds per "
        f"candidate{epochs}. Test figure: mean Kendall's tau over the test graphs (higher is "
        "better); seed spread: the larger of the candidates' population std over seeds of the "
        "per-seed test tau; holds: chosen's test tau >= best candidate's - spread.",
        "",
    ]
    for collection in LAYOUT_COLLECTIONS:
        mine = [r for r in rows if r["collection"] == collection]
        if not mine:
            continue
        head = " | ".join(f"{o} test tau" for o in options)
        parts += [
            f"## layout:{collection}",
            "",
            f"| world | {head} | chosen on valid | chosen's test tau | best candidate's test tau "
            "| seed spread | holds |",
            "|" + "---|" * (len(options) + 6),
        ]
        for r in mine:
            cells = " | ".join(f"{r['test'][o]:.4f}" for o in options)
            parts.append(
                f"| {r['world']} ({r['test_graphs']} test graph{'s' * (r['test_graphs'] != 1)}) "
                f"| {cells} | {r['chosen']} | {r['test'][r['chosen']]:.4f} | "
                f"{r['best_candidate']:.4f} | {r['spread']:.4f} | "
                f"{'yes' if r['holds'] else 'no'} |"
            )
        parts.append("")
    return "\n".join(parts)


def main_layout(args) -> None:
    worlds = list(LAYOUT_WORLDS) if args.layout_worlds == "all" else args.layout_worlds.split(",")
    unknown = [w for w in worlds if w not in LAYOUT_WORLDS]
    if unknown:
        raise SystemExit(f"error: --layout_worlds: unknown {', '.join(unknown)}")
    sets = {}
    for world in worlds:  # every world's set first: a failing generator stops before training
        sets[world], gen_s = layout_set(args, world)
        made = f"made in {gen_s:.0f} s" if gen_s > 1 else "reused"
        print(f"{world}: set {sets[world]} ({made})", flush=True)
    rows = [r for world in worlds for r in judge_layout_world(args, world, sets[world])]
    out = Path(args.out)
    atomic_write_text(out / "choice_layout.json", json.dumps(rows, indent=1) + "\n")
    atomic_write_text(out / "choice_layout.md", layout_markdown(rows, args))
    print((out / "choice_layout.md").read_text())


def main_tile(args) -> None:
    worlds = list(quality.WORLDS) if args.worlds == "all" else args.worlds.split(",")
    rows = []
    for world in worlds:
        rows.append(judge_world(args, world))
        print(f"{world}: chose {rows[-1]['chosen']}, holds: {rows[-1]['holds']}", flush=True)
    out = Path(args.out)
    atomic_write_text(out / "choice.json", json.dumps(rows, indent=1) + "\n")
    atomic_write_text(out / "choice.md", markdown(rows, args))
    print((out / "choice.md").read_text())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="all", help="comma-separated tile worlds, or all")
    parser.add_argument("--size", default="medium", choices=sorted(quality.SIZES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--candidates", default="baseline,recommended")
    parser.add_argument("--data_seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=0, help="the job's local workers")
    parser.add_argument("--out", default="out/choice")
    parser.add_argument("--kinds", default="tile", help="tile, layout or tile,layout")
    parser.add_argument(
        "--layout_worlds", default="all", help="comma-separated: permutations, decisions; or all"
    )
    parser.add_argument(
        "--preset", default="release_eighth", help="layout sets' preset (release_eighth ... "
        "release), or toy: layout_quality's toy-size counts (permutations only)",
    )  # fmt: skip
    parser.add_argument("--layout_candidates", default="baseline,recommended")
    parser.add_argument("--layout_data_seed", type=int, default=0)
    parser.add_argument(
        "--epochs", type=int, default=None, help="every training's epochs (smoke runs)"
    )
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    if not kinds or any(k not in ("tile", "layout") for k in kinds):
        raise SystemExit(f"error: --kinds: tile, layout or both, got {args.kinds!r}")
    if "tile" in kinds:
        main_tile(args)
    if "layout" in kinds:
        main_layout(args)


if __name__ == "__main__":
    main()
