#!/usr/bin/env python3
"""Ranking quality of training recipes across worlds, chosen on validation only.

    .venv/bin/python bench/quality.py --worlds all --protocol lowo    # the docs' first number
    .venv/bin/python bench/quality.py --worlds all --recipes baseline,ablation/X  # validation
    .venv/bin/python bench/quality.py --worlds all --protocol test --recipes recommended

A world is a synthetic set from `data/make_synthetic.py --world W`: the same
real file format, runtimes from a structurally different cost model
(`synthetic/tiles/worlds.py`: default, alternate, serial, cache).
Valid and test kernels come from programs train never holds. Each world's
labelled test split is kept apart (`<out>/holdout/`); training sees a test
split with hidden runtimes, as in the real release.

Each recipe (a flagfile name under configs/ or a path) trains once per seed
and world through `tiles_train.py --flagfile=...`; every saved model, and the
seeds' ensemble, is scored through the prediction path.

- `--protocol validation` (the default; what ablations and probes run): the
  validation split only. Test is never read.
- `--protocol lowo`: every recipe's validation in every world, then, for each
  world W, a recipe is chosen on the *other* worlds' validation: the incumbent
  (`--incumbent`, default recommended) is kept unless another recipe lowers the
  incumbent's worst world (highest top-5 ratio to the baseline) beyond the seed
  spread and raises no world beyond it (the worst-world rule: a mean lets one
  easy world hide a hard one); without an incumbent among the recipes, the
  lowest mean validation top-5 error. Only then is W's test split scored, for
  every recipe. The report gives the chosen recipe's ratios to the baseline
  (`--baseline`), its worst test program beside the baseline's error on it, the
  seeds' ensemble against its members, every recipe's ratio per held-out world
  with its mean and worst, and the rule's reason per world.
  `--closing_worlds` (lowo only; e.g. tpu, the world written from the TPU's
  published architecture) are trained and scored on test for every recipe only
  after every choice is made: nothing chooses on them, and the report gives
  their columns beside the held-out worlds'.
- `--protocol test`: the test split of the named recipes, each scored once and
  logged (`<out>/test_log.jsonl`).

`--epochs N` sets every recipe's epochs: a check of the machinery in a minute
(`--size tiny`), whose figures are no verdict.

Writes `<out>/quality.{json,md}` (validation), `<out>/lowo.{json,md}` or
`<out>/test.{json,md}`, and figures. Trained runs stay in
`<out>/runs/<size>_<world>/<recipe>-<digest>/s<seed>` and are reused while the
flags the recipe resolves to (the digest) are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # this process scores the saved models

import bench_figures
import selection
from bench_common import recipe_path
from quality_report import markdown_table, pm
from quality_report import names as _names

from baselines.core import plots
from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.core.io_utils import atomic_write_text
from synthetic.tiles.worlds import BENCHMARK_WORLDS, WORLDS

SIZES = {
    "tiny": dict(train=24, valid=9, test=9, min_configs=5, max_configs=40, max_nodes=12),
    "small": dict(train=300, valid=60, test=60, min_configs=50, max_configs=1500),
    "medium": dict(train=600, valid=120, test=120, min_configs=50, max_configs=2000),
    "full": dict(train=1000, valid=200, test=200, min_configs=100, max_configs=3000),
}
PROTOCOLS = ("validation", "lowo", "test")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")


def recipe_digest(recipe: Path, overrides: list[str] | None = None) -> str:
    """Hash of the training flags a recipe resolves to: a changed recipe never reuses old runs.

    Of the resolved flags, not of the file's lines, so how a recipe file is
    written (flat, or including another) does not change its digest; `overrides`
    (`--epochs=N`) are flags given after the recipe's.
    """
    import tiles_train

    args = tiles_train.parse_args([f"--flagfile={recipe}", *(overrides or [])])
    return hashlib.sha256(json.dumps(args.to_dict(), sort_keys=True).encode()).hexdigest()[:8]


def _make(root: Path, size: str, world: str, seed: int, extra: list[str]) -> None:
    flags = [f"--{k}={v}" for k, v in SIZES[size].items()]
    cmd = [sys.executable, str(ROOT / "data" / "make_synthetic.py"), f"--out={root}", *flags]
    cmd += [f"--world={world}", f"--seed={seed}", "--quiet", *extra]
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL)


def generate(out: Path, size: str, world: str, seed: int) -> tuple[Path, Path]:
    """The world's training root (test runtimes hidden) and its labelled test split.

    Both made once and marked by their parameters. The labelled test split is
    the same kernels as the hidden one (every kernel is a pure function of
    seed, split and index), kept outside the training root.
    """
    name = f"{size}_{world}"
    root, holdout = out / "sets" / name, out / "holdout" / name
    params = dict(SIZES[size], world=world, seed=seed)
    marker = out / "sets" / f"{name}.json"
    if marker.is_file() and json.loads(marker.read_text()) == params:
        return root, holdout / "test"
    for folder in (root, holdout):
        shutil.rmtree(folder, ignore_errors=True)
    _make(root, size, world, seed, [])
    _make(holdout, size, world, seed, ["--test_labels"])
    for split in ("train", "valid"):
        shutil.rmtree(holdout / split)
    atomic_write_text(marker, json.dumps(params))
    return root, holdout / "test"


def train_run(
    recipe: Path, data_root: Path, out_dir: Path, seed: int, overrides: list[str] | None = None
) -> dict:
    """Trains one seed of a recipe (reused when its run file exists); returns the record."""
    runs = sorted(out_dir.glob("run_*.jsonz"))
    if not runs:
        cmd = [sys.executable, str(ROOT / "tiles_train.py"), f"--flagfile={recipe}"]
        cmd += overrides or []
        cmd += [f"--seed={seed}", f"--data_root={data_root}", f"--out_dir={out_dir}"]
        cmd += [f"--cache_dir={data_root.parent / 'cache' / data_root.name}"]
        started = time.perf_counter()
        proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise PipelineError(f"training {recipe.name} seed {seed} failed: {tail[0]}")
        (out_dir / "wall_s.txt").write_text(f"{time.perf_counter() - started:.1f}\n")
        runs = sorted(out_dir.glob("run_*.jsonz"))
    from baselines.tiles.run_records import read_run_file  # needs TensorFlow: imported late

    record = read_run_file(runs[0])
    record["wall_s"] = float((out_dir / "wall_s.txt").read_text())
    record["model_dir"] = str(out_dir / f"model_{record['run_hash']}")
    return record


def score(model_dirs: list[str], split) -> list[dict]:
    """Error-table rows of each model ("0", "1", ...) and, with several, their "ensemble"."""
    from baselines.core.ranking import ensemble_scores
    from baselines.tiles.error_table import error_table
    from baselines.tiles.predict import SavedRanker

    members = {
        str(i): SavedRanker.load(d).score(split, progress=False) for i, d in enumerate(model_dirs)
    }
    if len(members) > 1:
        members["ensemble"] = ensemble_scores(list(members.values()))
    return error_table(split, members)


class Benchmark:
    """The runs of one `bench/quality.py` call: worlds, recipes, seeds, where they live."""

    def __init__(self, args) -> None:
        self.out = args.out.expanduser().resolve()
        self.size, self.seeds, self.data_seed = args.size, args.seeds, args.data_seed
        all_worlds = list(BENCHMARK_WORLDS)
        self.worlds = all_worlds if args.worlds == "all" else _names(args.worlds, "--worlds")
        closing = args.closing_worlds
        self.closing = _names(closing, "--closing_worlds") if closing else []
        unknown = [w for w in self.worlds + self.closing if w not in WORLDS]
        if unknown:
            raise PipelineError(
                f"--worlds: unknown {', '.join(unknown)}; choose from {', '.join(WORLDS)} or all"
            )
        both = sorted(set(self.worlds) & set(self.closing))
        if both:
            raise PipelineError(
                f"--closing_worlds: {', '.join(both)} also in --worlds; a closing world is "
                "never chosen on, so it may not be a held-out world too"
            )
        if self.closing and args.protocol != "lowo":
            raise PipelineError("--closing_worlds: only with --protocol lowo")
        self.recipes = {name: recipe_path(name) for name in _names(args.recipes, "--recipes")}
        self.baseline = args.baseline
        self.incumbent = args.incumbent if args.incumbent in self.recipes else None
        # Flags set in every run after its recipe's: --epochs for quick checks.
        self.overrides = [] if args.epochs is None else [f"--epochs={args.epochs}"]
        self.roots: dict[str, tuple[Path, Path]] = {}

    def root(self, world: str) -> tuple[Path, Path]:
        if world not in self.roots:
            self.roots[world] = generate(self.out, self.size, world, self.data_seed)
        return self.roots[world]

    def records(self, world: str, name: str) -> list[dict]:
        recipe = self.recipes[name]
        folder = f"{name.replace('/', '_')}-{recipe_digest(recipe, self.overrides)}"
        records = []
        for seed in range(self.seeds):
            run_dir = self.out / "runs" / f"{self.size}_{world}" / folder / f"s{seed}"
            records.append(train_run(recipe, self.root(world)[0], run_dir, seed, self.overrides))
        return records

    def validation(self) -> dict[str, dict[str, dict]]:
        """valid[world][recipe]: the validation summary. Reads no test split."""
        from baselines.tiles.data import load_split

        valid: dict[str, dict[str, dict]] = {}
        for world in self.worlds:
            split = load_split(self.root(world)[0] / "valid", name="valid", progress=False)
            valid[world] = {}
            for name in self.recipes:
                records = self.records(world, name)
                rows = score([r["model_dir"] for r in records], split)
                valid[world][name] = selection.summarize_runs(rows, [r["wall_s"] for r in records])
                top5 = valid[world][name]["top5_err"]
                print(f"{world} {name}: val top-5 {top5[0]:.4f} ± {top5[1]:.4f}", flush=True)
        return valid

    def test(self, pairs: list[tuple[str, str]]) -> dict[str, dict[str, dict]]:
        """test[world][recipe] for each (world, recipe) pair: each split read once, logged."""
        from baselines.tiles.data import load_split

        test: dict[str, dict[str, dict]] = {}
        by_world: dict[str, list[str]] = {}
        for world, name in dict.fromkeys(pairs):
            by_world.setdefault(world, []).append(name)
        for world, names in by_world.items():
            split = load_split(self.root(world)[1], name="test", progress=False)
            for name in names:
                records = self.records(world, name)
                rows = score([r["model_dir"] for r in records], split)
                summary = selection.summarize_runs(rows, [r["wall_s"] for r in records])
                test.setdefault(world, {})[name] = summary
                entry = {"time": time.time(), "world": world, "recipe": name, "size": self.size}
                entry["digest"] = recipe_digest(self.recipes[name], self.overrides)
                entry["top5_err"] = summary["top5_err"]
                with open(self.out / "test_log.jsonl", "a") as log:
                    log.write(json.dumps(entry) + "\n")
        return test


def epochs_note(bench: Benchmark) -> str:
    """How the recipes' own epochs were overridden, for the reports' first lines."""
    return "".join(f", every recipe's {flag[2:]} (a quick check)" for flag in bench.overrides)


def summary_markdown(bench: Benchmark, per_world: dict, split: str) -> str:
    """The table of one split's summaries (`split`: "val" or "test")."""
    what = "Validation only (test never read)" if split == "val" else "Test, scored once"
    intro = (
        f"{what}. Size {bench.size} ({SIZES[bench.size]}), {bench.seeds} seeds, data seed "
        f"{bench.data_seed}{epochs_note(bench)}; {split} programs never seen in training. "
        "Mean ± std over seeds; "
        "`ens` = the seeds' ensemble; worst = the program with the highest mean top-5 error."
    )
    header = [
        "world", "recipe", *(f"{split} {m}" for m in ("top-1", "top-5", "top-10", "OPA")),
        "ens top-5", "worst program: top-5", "train s",
    ]  # fmt: skip
    rows = []
    for world, by_recipe in per_world.items():
        for name, s in by_recipe.items():
            ens = f"{s['ensemble']['top5_err']:.3f}" if s["ensemble"] else "-"
            worst = s["worst_program"]
            worst_text = f"{worst}: {s['programs'][worst]['top5_err']:.3f}" if worst else "-"
            metrics = [pm(s[m]) for m in ("top1_err", "top5_err", "top10_err", "opa")]
            wall = f"{s['train_wall_s'][0]:.0f}"
            rows.append([world, name, *metrics, ens, worst_text, wall])
    return intro + "\n\n" + markdown_table(header, rows)


def lowo_markdown(bench: Benchmark, rows: list[dict], overall: str, valid: dict) -> str:
    intro = (
        f"Leave one world out: each world's recipe chosen on the other worlds' validation "
        f"(candidates: {', '.join(bench.recipes)}), then its test split scored once beside "
        f"the baseline's ({bench.baseline}). Size {bench.size}, {bench.seeds} seeds"
        f"{epochs_note(bench)}; test "
        "programs never seen in training."
    )
    header = [
        "held-out world", "chosen", "test top-5", "baseline", "ratio", "test top-1", "baseline",
        "ratio", "worst program: chosen / baseline top-5", "ens / members top-5",
    ]  # fmt: skip
    table = [
        [
            r["world"], r["chosen"], pm(r["top5_err"]), pm(r["baseline_top5_err"]),
            f"{r['top5_ratio']:.2f}", pm(r["top1_err"]), pm(r["baseline_top1_err"]),
            f"{r['top1_ratio']:.2f}",
            f"{r['worst_program']}: {r['worst_top5_err']:.3f} / "
            f"{r['baseline_on_worst_top5_err']:.3f}",
            f"{r['ensemble_top5_err']:.3f} / {r['members_mean_top5_err']:.3f}",
        ]
        for r in rows
    ]  # fmt: skip
    lines = [intro, "", markdown_table(header, table).rstrip("\n")]
    means = {
        name: selection.choice_key([valid[w][name] for w in bench.worlds]) for name in bench.recipes
    }
    lines += [
        "",
        f"Chosen on every world's validation: **{overall}** "
        "(mean validation top-5 / top-1 over the worlds: "
        + ", ".join(f"{n} {k[0]:.3f} / {k[1]:.3f}" for n, k in means.items())
        + ").",
    ]
    return "\n".join(lines) + "\n"


def ratio_markdown(
    bench: Benchmark, ratios: list[dict], ruled: dict, closing: dict | None = None
) -> str:
    """Every recipe's held-out test top-5 ratio to the baseline per world, mean and worst, then
    the closing worlds' ratios (top-5 and top-1: chosen on by nothing); then each held-out
    world's choice by the worst-world rule and why (when an incumbent is set)."""
    closing = closing or {}
    header = ["recipe", *bench.worlds, "mean", "worst (world)"]
    header += [f"{w} (closing) top-5 / top-1" for w in closing]
    table = []
    for r in ratios:
        row = [r["recipe"], *(f"{r['ratios'][w]:.2f}" for w in bench.worlds), f"{r['mean']:.2f}"]
        row.append(f"**{r['worst']:.2f}** ({r['worst_world']})")
        for by_recipe in closing.values():
            top5, top1 = (
                selection.ratio_of(by_recipe, r["recipe"], bench.baseline, metric)
                for metric in ("top5_err", "top1_err")
            )
            row.append(f"{top5:.2f} / {top1:.2f}")
        table.append(row)
    lines = ["", "Test top-5 / baseline's, every recipe in every held-out world:", ""]
    if closing:
        lines[1] = (
            "Test top-5 / baseline's, every recipe in every held-out world; the closing "
            f"worlds ({', '.join(closing)}) were trained and scored after every choice:"
        )
    lines.append(markdown_table(header, table).rstrip("\n"))
    if ruled:
        lines += ["", f"The worst-world rule (incumbent {bench.incumbent}), per held-out world:"]
        lines += [f"- {w}: {chosen}: {why}" for w, (chosen, why) in ruled.items()]
    return "\n".join(lines) + "\n"


def figure_result(bench: Benchmark, per_world: dict, split: str) -> dict:
    """The shape `bench_figures.quality_figures` reads: results["world|recipe"][split]."""
    results = {}
    for world, by_recipe in per_world.items():
        for name, summary in by_recipe.items():
            results[f"{world}|{name}"] = {split: summary}
    return {"recipes": {name: "" for name in bench.recipes}, "results": results}


def build_parser():
    parser = entry_parser(__doc__)
    parser.add_argument(
        "--worlds",
        default="default,alternate",
        help=f"comma-separated worlds ({', '.join(WORLDS)}) or all ({', '.join(BENCHMARK_WORLDS)})",
    )
    parser.add_argument("--sets", dest="worlds", help="the older name of --worlds")
    parser.add_argument(
        "--closing_worlds",
        default="",
        help="lowo: worlds trained and scored on test after every choice, chosen on by nothing "
        "(e.g. tpu); their ratios to the baseline join the report",
    )
    parser.add_argument(
        "--size",
        choices=list(SIZES),
        default="full",
        help="kernels per split: tiny 24/9/9 (tests), small 300/60/60, medium 600/120/120, "
        "full 1000/200/200",
    )
    parser.add_argument("--seeds", type=int, default=3, help="training seeds per recipe and world")
    parser.add_argument(
        "--recipes", default="baseline,recommended", help="flagfile names or paths, comma-separated"
    )
    parser.add_argument(
        "--baseline", default="baseline", help="the recipe the lowo report compares against"
    )
    parser.add_argument(
        "--incumbent",
        default="recommended",
        help="lowo: the recipe kept unless another is adopted by the worst-world rule (it lowers "
        "the incumbent's worst world beyond the seed spread and hurts no world beyond it); "
        "not among --recipes: the lowest mean validation error is chosen",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="validation",
        help="validation: the valid splits only; lowo: choose per held-out world on the "
        "others' validation, then report its test; test: report the named recipes' test",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "out" / "quality",
        help="sets, trained runs (reused while a recipe is unchanged), tables and figures",
    )
    parser.add_argument("--data_seed", type=int, default=1, help="seed of the generated sets")
    parser.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="override every recipe's epochs (quick checks, not verdicts; default: the recipe's)",
    )
    return parser


def main() -> int:
    args = build_parser().parse_args()
    if args.seeds < 1:
        raise PipelineError(f"--seeds: must be at least 1, got {args.seeds}")
    if args.epochs is not None and args.epochs < 1:
        raise PipelineError(f"--epochs: must be at least 1, got {args.epochs}")
    bench = Benchmark(args)
    if args.protocol == "lowo" and len(bench.worlds) < 2:
        raise PipelineError("--protocol lowo: leaving one world out needs two worlds or more")
    if args.protocol == "lowo" and bench.baseline not in bench.recipes:
        raise PipelineError(f"--baseline {bench.baseline} must be one of --recipes")
    bench.out.mkdir(parents=True, exist_ok=True)

    if args.protocol == "test":
        test = bench.test([(w, r) for w in bench.worlds for r in bench.recipes])
        result = {"size": bench.size, "seeds": bench.seeds, "overrides": bench.overrides}
        result["test"] = test
        atomic_write_text(bench.out / "test.json", json.dumps(result, indent=1) + "\n")
        text = summary_markdown(bench, test, "test")
        atomic_write_text(bench.out / "test.md", text)
        print(text)
        return 0

    valid = bench.validation()
    result = {
        "protocol": "validation",
        "size": bench.size,
        "sizes": SIZES[bench.size],
        "seeds": bench.seeds,
        "worlds": bench.worlds,
        "recipes": {k: str(v) for k, v in bench.recipes.items()},
        "overrides": bench.overrides,
        "valid": valid,
    }
    atomic_write_text(bench.out / "quality.json", json.dumps(result, indent=1) + "\n")
    text = summary_markdown(bench, valid, "val")
    atomic_write_text(bench.out / "quality.md", text)
    per_program, ablation = bench_figures.quality_figures(
        figure_result(bench, valid, "valid"), "valid"
    )
    plots.save_png(per_program, bench.out / "quality_per_program.png")
    plots.save_png(ablation, bench.out / "quality_ablation.png")
    print(text)
    if args.protocol != "lowo":
        return 0

    # Choose first, from validation alone; only then is any test split read.
    candidates = list(bench.recipes)
    if bench.incumbent:  # the worst-world rule: the incumbent stays unless a change is adopted
        ruled = selection.lowo_worst_choices(
            valid, bench.worlds, candidates, bench.incumbent, bench.baseline
        )
        choices = {w: chosen for w, (chosen, _) in ruled.items()}
    else:
        ruled, choices = {}, selection.lowo_choices(valid, bench.worlds, candidates)
    overall = selection.choose(valid, bench.worlds, candidates)
    test = bench.test([(w, c) for w in bench.worlds for c in candidates])
    rows = selection.lowo_rows(test, choices, bench.baseline)
    ratios = selection.ratio_rows(test, bench.worlds, candidates, bench.baseline)
    # The closing worlds: first trained now, after every choice above, and chosen on by nothing.
    closing = bench.test([(w, c) for w in bench.closing for c in candidates])
    lowo = {"choices": choices, "why": ruled, "overall_choice": overall, "rows": rows}
    lowo.update(ratios=ratios, test=test, closing=closing)
    atomic_write_text(bench.out / "lowo.json", json.dumps(lowo, indent=1) + "\n")
    text = lowo_markdown(bench, rows, overall, valid)
    text += ratio_markdown(bench, ratios, ruled, closing)
    atomic_write_text(bench.out / "lowo.md", text)
    plots.save_png(bench_figures.lowo_figure(rows), bench.out / "lowo.png")
    print(text)
    return 0


if __name__ == "__main__":
    run_cli(main)
