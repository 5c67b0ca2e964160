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
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import quality  # noqa: E402  (the worlds' sets, made once)

from baselines.core.io_utils import atomic_write_text  # noqa: E402
from baselines.core.rank_run import BLEND, read_items_csv  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")


def run(cmd: list[str], log: Path) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        proc = subprocess.run([sys.executable, *cmd], cwd=ROOT, env=ENV, stdout=f, stderr=f)
    if proc.returncode != 0:
        raise SystemExit(f"error: {cmd[0]} failed; see {log}")


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
            f"--seeds={args.seeds}", f"--out={job_out}", f"--tile_candidates={args.candidates}",
            *([f"--direct_num_workers={args.workers}"] if args.workers else []),
        ],
        job_out / "job.log",
    )  # fmt: skip
    done = json.loads((job_out / "tile_xla" / ".done.json").read_text())
    groups = {name: sorted(dirs) for name, dirs in done["inputs"]["models"].items()}
    every = sorted(d for dirs in groups.values() for d in dirs)
    output = job_out / "test_evaluation"
    if not Path(f"{output}_items.csv").is_file():
        run(
            [
                "tiles_evaluate.py", f"--dirs={','.join(every)}", "--split=test",
                f"--data_root={test_dir.parent}", f"--groups_json={json.dumps(groups)}",
                f"--output={output}",
            ],
            job_out / "test_evaluation.log",
        )  # fmt: skip
    items = read_items_csv(Path(f"{output}_items.csv"))

    def top5_err(label: str) -> float:  # the item figure is 1 - the kernel's top-5 error
        return 1.0 - statistics.mean(items[label].values())

    options = [*groups, BLEND]
    seeds = {
        name: [top5_err(f"model {Path(d).name}") for d in dirs] for name, dirs in groups.items()
    }
    spread = max(statistics.pstdev(v) for v in seeds.values())
    test = {o: top5_err(o) for o in options}
    best = min(test[o] for o in groups)
    chosen = done["choice"]["chosen"]
    return {
        "world": world,
        "test": test,
        "seeds": seeds,
        "spread": spread,
        "chosen": chosen,
        "reason": done["choice"]["reason"],
        "best_candidate": best,
        "holds": test[chosen] <= best + spread,
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="all", help="comma-separated tile worlds, or all")
    parser.add_argument("--size", default="medium", choices=sorted(quality.SIZES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--candidates", default="baseline,recommended")
    parser.add_argument("--data_seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=0, help="the job's local workers")
    parser.add_argument("--out", default="out/choice")
    args = parser.parse_args(argv)
    worlds = list(quality.WORLDS) if args.worlds == "all" else args.worlds.split(",")
    rows = []
    for world in worlds:
        rows.append(judge_world(args, world))
        print(f"{world}: chose {rows[-1]['chosen']}, holds: {rows[-1]['holds']}", flush=True)
    out = Path(args.out)
    atomic_write_text(out / "choice.json", json.dumps(rows, indent=1) + "\n")
    atomic_write_text(out / "choice.md", markdown(rows, args))
    print((out / "choice.md").read_text())


if __name__ == "__main__":
    main()
