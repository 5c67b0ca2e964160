#!/usr/bin/env python3
"""The one-command job's time at the real release's size, from a run on a fraction of its files.

    python data/make_synthetic.py --out <work>/tile --preset release_quarter
    python data/make_synthetic.py --collection layout --preset release_eighth \
        --search_space decisions --out <work>/layout        # nlp: --nlp_configs, see below
    python kaggle_submission.py --data_root <work>/root --out <out> --seeds=1
    .venv/bin/python bench/job_at_release.py --out <out> --data_root <work>/root

Every file keeps its real size; only the number of files is a fraction. Each step
of the finished job (`<out>/**/.done.json`) is scaled by the ratio of the
release's file count to the run's, of the split the step reads most: a training
by train, an evaluation by valid, a ranking by test. Start-up is scaled with
it, so the figures are upper bounds. A step's time is its CPU seconds (its wall
on a core of its own, so a run on a busy machine still measures it; with
`--by wall`, its wall seconds). Each lane (a worker process of the local
runner) runs its steps one after another and takes the next as it goes, so the
job at the release's size is about its scaled work shared over its lanes, and
at least its longest step; this run's own longest lane is given too. A step
reused from an earlier run has no time and is left out, said. Writes
`<out>/at_release.md`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baselines.core.io_utils import atomic_write_text  # noqa: E402
from baselines.jobs.submission_job import SPECS  # noqa: E402
from synthetic.layout.release import RELEASE_COUNTS as LAYOUT_COUNTS  # noqa: E402
from synthetic.tiles.options import RELEASE_COUNTS as TILE_COUNTS  # noqa: E402

STEP_SPLIT = {"train": "train", "evaluate": "valid", "predict": "test"}


def folder_of(data_root: Path, slug: str) -> tuple[Path, dict[str, int]]:
    """A collection's split folders' parent under the data root (where the job reads it), and
    the release's file counts per split."""
    spec = next(c for c in SPECS.values() if c.slug == slug)
    counts = TILE_COUNTS if spec.kind == "tile" else LAYOUT_COUNTS[spec.name.split(":", 1)[1]]
    return spec.folder(data_root, toy=False), counts


def steps(out: Path, data_root: Path, by: str) -> list[dict]:
    """Every timed step of the job: collection, step, worker, wall s, its scale, peak MB. A
    step that reused an earlier run has no time: it is left out and said."""
    rows, untimed = [], []
    for slug_dir in sorted(p for p in out.iterdir() if (p / ".done.json").is_file()):
        if slug_dir.name == "join":
            continue
        folder, release = folder_of(data_root, slug_dir.name)
        ratio = {
            split: release[split] / len(list((folder / split).glob("*.npz")))
            for split in ("train", "valid", "test")
        }
        rank = json.loads((slug_dir / ".done.json").read_text())
        for record in sorted(slug_dir.glob("*/seed_*/.done.json")):
            done = json.loads(record.read_text())
            name = f"train {record.parent.parent.name} {record.parent.name}"
            if done.get("cpu_s") is None:
                untimed.append(f"{slug_dir.name} {name}")
                continue
            rows.append(_row(slug_dir.name, name, done, done["worker"], ratio["train"], by))
        for step in ("evaluate", "predict"):
            split = STEP_SPLIT[step]
            rows.append(_row(slug_dir.name, step, rank[step], rank["worker"], ratio[split], by))
    if untimed:
        print(f"left out, reused from an earlier run (no time): {', '.join(untimed)}")
    return rows


def _row(slug: str, step: str, cost: dict, worker: str, ratio: float, by: str) -> dict:
    return {
        "collection": slug,
        "step": step,
        "worker": worker,
        "threads": cost.get("threads"),
        "wall_s": cost["wall_s"],
        "cpu_s": cost["cpu_s"],
        "ratio": ratio,
        "release_s": cost[f"{by}_s"] * ratio,
        "peak_mb": cost["peak_rss_mb"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the finished job's --out")
    parser.add_argument("--data_root", required=True, help="the job's --data_root")
    parser.add_argument("--by", default="cpu", choices=("cpu", "wall"), help="a step's time")
    args = parser.parse_args(argv)
    out, data_root = Path(args.out), Path(args.data_root)
    rows = steps(out, data_root, args.by)
    lanes: dict[str, float] = defaultdict(float)
    measured: dict[str, float] = defaultdict(float)
    for r in rows:
        lanes[r["worker"]] += r["release_s"]
        measured[r["worker"]] += r[f"{args.by}_s"]
    lines = [
        "| collection | step | worker | TF threads | wall s | CPU s | x files "
        f"| {args.by} s at release\\* | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['collection']} | {r['step']} | {r['worker']} | {r['threads'] or '-'} | "
            f"{r['wall_s']:.0f} | {r['cpu_s']:.0f} | {r['ratio']:.2f} | {r['release_s']:.0f} | "
            f"{r['peak_mb']:.0f} |"
        )
    lines.append("")
    for worker in sorted(lanes):
        lines.append(
            f"- lane {worker}: {measured[worker]:.0f} s measured, "
            f"{lanes[worker]:.0f} s\\* at the release's size"
        )
    longest = max(lanes.values())
    lines.append(f"- this run's longest lane at the release's size\\*: {longest:.0f} s")
    # The lanes take the trainings as they go, so the job is about its work over the lanes,
    # and at least its longest step.
    shared = max(sum(lanes.values()) / len(lanes), max(r["release_s"] for r in rows))
    lines.append(
        f"- the job at the release's size\\*, its {len(lanes)} lanes sharing the steps: "
        f"{shared:.0f} s ({shared / 60:.0f} min)"
    )
    text = "\n".join(lines) + "\n"
    atomic_write_text(out / "at_release.md", text)
    print(text)


if __name__ == "__main__":
    main()
