#!/usr/bin/env python3
"""Test Kendall's tau and slowdown@k of layout recipes on generated sets, over seeds, with verdicts.

    .venv/bin/python bench/layout_quality.py --counts train=8,valid=3,test=3 --seeds 0,1,2
    .venv/bin/python bench/layout_quality.py --cost_models standard,alternate --collections all
    .venv/bin/python bench/layout_quality.py --ablation --collections xla:default
    .venv/bin/python bench/layout_quality.py --preset release_eighth --collections xla:default
    .venv/bin/python bench/layout_quality.py --preset release --search_space decisions

For each cost model (`--cost_models`) a synthetic layout set is generated with
`synthetic.layout.write_layout_dataset` (`--counts` toy-size files per
split, `--data_seed`, test split labelled: `test_labels=True`), or with
`--preset` by `write_release_dataset` (release-size graphs, the preset's counts
per split, the chosen collections only), under
`<out>/sets/<cost model>-<digest of its parameters>/`, and reused while those
parameters are unchanged. A cost model other than "standard" is passed as the
generator's `cost_model=` keyword; a generator without that keyword refuses it
in one line before anything is trained. `--search_space decisions` (release-size
sets only) writes configurations tied into a few binary decisions, as the real
files' are, instead of free permutations: another world, with sets of its own.

For every collection, recipe (`configs/layout/<name>.flags`, or a path) and
seed, the recipe trains as `layout_train.py --flagfile=<recipe>` would (its
parser and `split_kwargs()`, through the conductor's `train_run`; `--epochs`
overrides every recipe's) on the train split, with the valid split for early
stopping, every split read through the layout cache in `<out>/cache`. Nothing
is chosen on test: the test graphs are only scored, after training. A run's
training wall seconds run from the first epoch to the best epoch's weights
restored (loading and the scoring below not included). Each seed's model ranks
every configuration of every valid and test graph;
`baselines.layout.metrics.evaluation_rows` gives Kendall's tau and
slowdown@1/10/100 per graph, program and overall, for each seed and for the
seeds' ensemble (`core.ranking.ensemble_scores`). A run's scores are kept in
`<out>/runs/...` and reused while the resolved flags (the run hash) and the set
are unchanged. Progress goes to stderr: a bar while a set is written, and a line
when each run starts, ends (training and scoring seconds, best epoch) or is reused.

The report (`<out>/layout_quality.{json,md,png}`): per cost model, collection
and recipe the valid and test tau, test slowdown@1/10/100 (mean ± population
std over seeds), the ensemble's test tau against the mean of its members and
the training wall seconds; a per-program test table; and the verdicts of every
recipe against `--baseline` (`layout_verdicts`: tau gain >= 0.1 and
> 2 × (std_baseline + std_recipe); slowdown@1 at most half the baseline's;
ensemble tau above its members' mean), each met or missed with its numbers.
The PNG: test tau per cost model and collection, one bar per recipe, ± std.

`--ablation`: the recommended recipe and each variant in
`configs/layout/ablation/*.flags` (the recommended file with one flag
changed), reported against the recommended recipe (change of test tau and
slowdown@1, whether the tau change exceeds twice the spread) in
`<out>/layout_ablation.{json,md,png}`.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from quality_report import names, pm
from tqdm import tqdm

from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.core.io_utils import atomic_write_text
from synthetic.layout.decisions import SEARCH_SPACES
from synthetic.layout.release import PRESETS, preset_counts

RECIPES = ROOT / "configs" / "layout"
COLLECTIONS = ("xla:default", "xla:random", "nlp:default", "nlp:random")
COST_MODELS = ("standard", "alternate")
SPLITS = ("train", "valid", "test")
REFERENCE = "recommended"  # what --ablation compares its variants with
DEFAULT_COUNTS = "train=8,valid=3,test=3"


def recipe_path(name: str) -> Path:
    """configs/layout/<name>.flags, or `name` itself when it is a .flags file."""
    path = Path(name)
    if path.suffix == ".flags" and path.is_file():
        return path.resolve()
    path = RECIPES / f"{name}.flags"
    if not path.is_file():
        raise PipelineError(f"--recipes: no layout flagfile for '{name}' (looked for {path})")
    return path


def ablation_recipes() -> list[str]:
    """The recommended recipe, then every configs/layout/ablation/*.flags by name."""
    variants = sorted(p.stem for p in (RECIPES / "ablation").glob("*.flags"))
    return [REFERENCE, *(f"ablation/{v}" for v in variants)]


def parse_counts(text: str) -> dict[str, int]:
    """ "train=8,valid=3,test=3" -> {"train": 8, "valid": 3, "test": 3}; each split once, >= 1."""
    counts: dict[str, int] = {}
    for item in names(text, "--counts"):
        split, _, value = item.partition("=")
        if split not in SPLITS or split in counts or not value.strip().isdigit():
            raise PipelineError(
                f"--counts: bad item {item!r}; expected train=N,valid=N,test=N (each once)"
            )
        counts[split] = int(value)
    if set(counts) != set(SPLITS) or min(counts.values()) < 1:
        raise PipelineError(f"--counts: give train, valid and test, each at least 1: {text!r}")
    return counts


def cost_model_kwargs(cost_model: str, writer: Callable[..., Any]) -> dict[str, str]:
    """The keyword `writer` gets for `cost_model`: none for "standard", else cost_model=...

    Refused in one line for an unknown name, or when `writer` takes no `cost_model`.
    """
    if cost_model not in COST_MODELS:
        raise PipelineError(
            f"--cost_models: unknown cost model {cost_model!r}; "
            f"choose from {', '.join(COST_MODELS)}"
        )
    if cost_model == "standard":
        return {}
    if "cost_model" not in inspect.signature(writer).parameters:
        raise PipelineError(
            f"--cost_models {cost_model}: this checkout's layout generator has only the standard "
            "cost model (write_layout_dataset takes no cost_model); use --cost_models standard"
        )
    return {"cost_model": cost_model}


def generate(
    out: Path,
    cost_model: str,
    counts: Mapping[str, int] | None,
    seed: int,
    preset: str | None = None,
    collections: Sequence[str] = COLLECTIONS,
    search_space: str = "permutations",
    progress: bool = False,
) -> Path:
    """The set of one cost model (test labelled), made once and reused while its parameters
    are unchanged: `<out>/sets/<cost model>-<digest>`.

    Without `preset`: `write_layout_dataset`, `counts` toy-size graphs per split and
    collection. With one (`release_eighth` ... `release`): `write_release_dataset`,
    release-size graphs of `collections`, as many per split as the preset gives; a
    release-size set made for more collections, same parameters otherwise, is reused.
    `progress`: a bar on stderr, one step per file written (release-size sets).
    """
    from synthetic.layout import RELEASE_NOISE_SIGMA, write_layout_dataset
    from synthetic.layout.release import write_release_dataset

    params: dict[str, Any] = {"seed": seed, "cost_model": cost_model, "test_labels": True}
    if preset is None:
        extra = cost_model_kwargs(cost_model, write_layout_dataset)
        params["counts"] = dict(counts or {})
    else:
        extra = cost_model_kwargs(cost_model, write_release_dataset)
        # The noise level is in the marker: sets written with another are not reused.
        params.update(
            preset=preset, collections=sorted(collections), noise_sigma=RELEASE_NOISE_SIGMA
        )
        if search_space != "permutations":  # sets written before the option keep their names
            params["search_space"] = search_space
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:8]
    root = out / "sets" / f"{cost_model}-{digest}"
    marker = root.with_suffix(".json")
    if root.is_dir() and marker.is_file() and json.loads(marker.read_text()) == params:
        return root
    if preset is not None:
        wider = _set_holding(out / "sets", cost_model, params)
        if wider is not None:
            return wider
    shutil.rmtree(root, ignore_errors=True)
    if preset is None:
        write_layout_dataset(root, counts, seed, test_labels=True, **extra)
    else:
        space = {"search_space": search_space} if "search_space" in params else {}
        files = sum(sum(preset_counts(preset, c).values()) for c in set(collections))
        with tqdm(
            total=files, desc=f"writing {root.name}", unit="file", disable=not progress
        ) as bar:
            write_release_dataset(
                root,
                preset,
                seed,
                collections=sorted(collections),
                test_labels=True,
                **extra,
                **space,
                log=lambda line: bar.update(1),
            )
    atomic_write_text(marker, json.dumps(params, sort_keys=True) + "\n")
    return root


def _set_holding(sets: Path, cost_model: str, params: dict[str, Any]) -> Path | None:
    """A release-size set made with the same parameters for more collections, if one exists.

    Each collection's files depend only on the preset, seed, cost model and noise level, never on
    the other collections written beside them, so a set of all four serves a run of one (and
    keeps its runs' cache, which is keyed by the set's name).
    """
    wanted = set(params["collections"])
    same = {k: v for k, v in params.items() if k != "collections"}
    for marker in sorted(sets.glob(f"{cost_model}-*.json")):
        try:
            found = json.loads(marker.read_text())
        except (OSError, ValueError):
            continue  # an unreadable marker: that set is not reused
        if not isinstance(found, dict) or not marker.with_suffix("").is_dir():
            continue
        rest = {k: v for k, v in found.items() if k != "collections"}
        if rest == same and wanted <= set(found.get("collections", [])):
            return marker.with_suffix("")
    return None


class LayoutQuality:
    """The runs of one `bench/layout_quality.py` call: sets, collections, recipes, seeds."""

    def __init__(self, args) -> None:
        self.out = args.out.expanduser().resolve()
        self.commit = commit()  # at the start: the code that trains, not the code at the end
        self.preset = args.preset
        if self.preset is not None and args.counts is not None:
            raise PipelineError(
                "--counts and --preset: give one (a preset sets the graphs per split)"
            )
        if self.preset is not None and self.preset not in PRESETS:
            raise PipelineError(
                f"--preset: unknown {self.preset!r}; choose from {', '.join(PRESETS)}"
            )
        self.counts = None if self.preset else parse_counts(args.counts or DEFAULT_COUNTS)
        self.search_space = args.search_space
        if self.search_space not in SEARCH_SPACES:
            raise PipelineError(
                f"--search_space: unknown {self.search_space!r}; "
                f"choose {' or '.join(SEARCH_SPACES)}"
            )
        if self.search_space != "permutations" and self.preset is None:
            raise PipelineError(
                "--search_space decisions: release-size sets only; add --preset (e.g. release)"
            )
        self.data_seed, self.epochs = args.data_seed, args.epochs
        self.cost_models = names(args.cost_models, "--cost_models")
        from synthetic.layout import write_layout_dataset

        for cost_model in self.cost_models:  # refused before anything is trained
            cost_model_kwargs(cost_model, write_layout_dataset)
        self.collections = (
            list(COLLECTIONS)
            if args.collections == "all"
            else names(args.collections, "--collections")
        )
        unknown = [c for c in self.collections if c not in COLLECTIONS]
        if unknown:
            raise PipelineError(
                f"--collections: unknown {', '.join(unknown)}; "
                f"choose from {', '.join(COLLECTIONS)} or all"
            )
        self.seeds = [int(s) for s in names(args.seeds, "--seeds")]
        if len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise PipelineError(f"--seeds: distinct integers >= 0, got {args.seeds!r}")
        listed = ablation_recipes() if args.ablation else names(args.recipes, "--recipes")
        self.recipes = {name: recipe_path(name) for name in listed}
        self.baseline = REFERENCE if args.ablation else args.baseline
        if self.baseline not in self.recipes:
            raise PipelineError(f"--baseline {self.baseline} must be one of --recipes")

    def run_args(self, recipe: Path, root: Path, collection: str, seed: int):
        """LayoutTrainArgs of one run, parsed by layout_train.py's own parser."""
        import layout_train

        source, search = collection.split(":")
        argv = [f"--flagfile={recipe}", f"--source={source}", f"--search={search}"]
        argv += [f"--seed={seed}", f"--data_root={root}", f"--cache_dir={self.out / 'cache'}"]
        if self.epochs is not None:
            argv.append(f"--epochs={self.epochs}")
        run = layout_train.parse_args(argv)
        run.check_flags()
        return run

    def run_scores(self, root: Path, collection: str, name: str, seed: int) -> dict[str, Any]:
        """One seed's {"wall_s", "valid": [scores per graph], "test": [...]}, trained or reused."""
        import numpy as np

        run = self.run_args(self.recipes[name], root, collection, seed)
        label = name.replace("/", "_")
        folder = self.out / "runs" / root.name / collection.replace(":", "_")
        folder = folder / f"{label}-{run.run_hash()[:10]}"
        record_path, scores_path = folder / "record.json", folder / "scores.npz"
        what = f"{root.name} {collection} {name} seed {seed}"
        if record_path.is_file() and scores_path.is_file():
            record = json.loads(record_path.read_text())
            with np.load(scores_path) as saved:
                for split in ("valid", "test"):
                    record[split] = [saved[f"{split}/{g}"] for g in record[f"{split}_graphs"]]
            print(f"{what}: reused {folder}", file=sys.stderr, flush=True)
            return record
        print(f"{what}: training", file=sys.stderr, flush=True)
        record = train_and_score(run, run.collection_dir(root))
        averaged = record["averaged_epochs"]
        mean = f"; ended on the mean of its last {averaged}" if averaged else ""
        print(
            f"{what}: trained in {record['wall_s']:.0f} s (best epoch {record['best_epoch'] + 1} "
            f"of {record['epochs_run']}, counted from 1{mean}), scored every valid and test "
            f"configuration in {record['score_s']:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        folder.mkdir(parents=True, exist_ok=True)
        arrays = {
            f"{split}/{g}": s
            for split in ("valid", "test")
            for g, s in zip(record[f"{split}_graphs"], record[split], strict=True)
        }
        np.savez(scores_path, **arrays)
        kept = {k: v for k, v in record.items() if k not in ("valid", "test")}
        atomic_write_text(record_path, json.dumps({**kept, "args": run.to_dict()}, indent=1) + "\n")
        return record

    def results(self) -> tuple[dict, dict[str, Path]]:
        """(results[cost_model][collection][recipe] summaries, the set of each cost model)."""
        import layout_verdicts as quality

        from baselines.layout.run_data import load_run_split

        results: dict[str, dict[str, dict[str, Any]]] = {}
        roots = {
            cm: generate(
                self.out,
                cm,
                self.counts,
                self.data_seed,
                self.preset,
                self.collections,
                self.search_space,
                progress=True,
            )
            for cm in self.cost_models
        }
        for cost_model, root in roots.items():
            for collection in self.collections:
                source, search = collection.split(":")
                labels = {}
                for split in ("valid", "test"):
                    graphs = load_run_split(
                        root / source / search / split, training=False, prune_hops=None, log=None
                    )
                    labels[split] = (
                        [g.graph_id for g in graphs],
                        [g.config_runtime for g in graphs],
                    )
                by_recipe = results.setdefault(cost_model, {}).setdefault(collection, {})
                for name in self.recipes:
                    runs = [self.run_scores(root, collection, name, s) for s in self.seeds]
                    rows = {}
                    for split in ("valid", "test"):
                        ids, runtimes = labels[split]
                        for r in runs:
                            if r[f"{split}_graphs"] != ids:
                                raise PipelineError(f"{collection} {split}: scored graphs differ")
                        rows[split] = quality.split_rows(ids, runtimes, [r[split] for r in runs])
                    by_recipe[name] = quality.recipe_summary(
                        rows["valid"], rows["test"], [r["wall_s"] for r in runs], self.seeds
                    )
                    val, test = by_recipe[name]["valid"], by_recipe[name]["test"]
                    print(
                        f"{cost_model} {collection} {name}: val tau {val['kendall_tau'][0]:.3f}, "
                        f"test tau {pm(test['kendall_tau'])}",
                        flush=True,
                    )
        return results, roots


def train_and_score(run, folder: Path) -> dict[str, Any]:
    """Trains one run as layout_train.py does (in this process, nothing saved) and scores
    every configuration of its collection's valid and test graphs with the trained model."""
    import dataclasses
    import gc
    import tempfile

    import tensorflow as tf

    from baselines.core.conductor import train_run
    from baselines.layout.batching import prepare_graphs
    from baselines.layout.run_data import load_run_split, read_layout_run, restore_layout_model
    from baselines.layout.scoring import GraphScorer
    from baselines.layout.task import LayoutTask, load_train_graphs

    tf.get_logger().setLevel("ERROR")  # one traced scorer per model: retracing notes are noise
    quiet = lambda line: None  # noqa: E731
    train, valid = load_train_graphs(run, folder, quiet)
    started = time.perf_counter()
    # No final validation: every configuration of valid is scored below.
    with tempfile.TemporaryDirectory() as out:
        task = LayoutTask(graphs=(train, valid), validate_all=False)
        trained = train_run(task, dataclasses.replace(run, out_dir=out), progress=False, log=quiet)
        model_dir = Path(out) / f"model_{trained['run_hash']}"
        model = restore_layout_model(model_dir, read_layout_run(model_dir))
    record: dict[str, Any] = {
        "wall_s": time.perf_counter() - started,
        "best_epoch": trained["best_epoch"],
        "epochs_run": len(trained["train_curve"]["epoch"]),
        "averaged_epochs": trained["averaged_epochs"],
        "run_hash": run.run_hash(),
    }
    started = time.perf_counter()
    scorer = GraphScorer(model)
    for split in ("valid", "test"):
        graphs = load_run_split(
            folder / split,
            training=False,
            prune_hops=run.prune_hops,
            log=None,
            cache_dir=run.cache_dir,
        )
        record[f"{split}_graphs"] = [g.graph_id for g in graphs]
        record[split] = [scorer.score(g) for g in prepare_graphs(graphs)]
    record["score_s"] = time.perf_counter() - started
    # Keras keeps every model built in this process (its graphs and traced functions) until
    # told: without this a sweep of many runs grows by each run's model and traces.
    del model, scorer, trained, task
    tf.keras.backend.clear_session()
    gc.collect()
    return record


def commit() -> str:
    """The checkout's short commit, "+dirty" when tracked files changed; "unknown" without git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode != 0
    except OSError:
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty and head else "")


def report(bench: LayoutQuality, results: dict, roots: dict[str, Path], ablation: bool) -> dict:
    """The JSON result, the markdown (also printed) and the PNG, written to <out>."""
    import layout_verdicts as quality
    from quality_report import spread_bars

    from baselines.core.plots import save_png

    entries = []
    if not ablation:
        for cost_model, by_collection in results.items():
            for collection, by_recipe in by_collection.items():
                for v in quality.verdicts(by_recipe, bench.baseline):
                    entries.append({"cost_model": cost_model, "collection": collection, **v})
    if bench.preset is None:
        sizes = (
            f"{bench.counts['train']}/{bench.counts['valid']}/{bench.counts['test']} toy-size "
            "graphs train/valid/test per collection"
        )
    else:
        sizes = (
            f"release-size graphs, preset {bench.preset} ("
            + "; ".join(
                f"{c} {'/'.join(str(n) for n in preset_counts(bench.preset, c).values())}"
                for c in bench.collections
            )
            + " train/valid/test)"
        )
    world = (
        f"synthetic layout sets from "
        f"`{'write_layout_dataset' if bench.preset is None else 'write_release_dataset'}` "
        f"(cost model(s) {', '.join(bench.cost_models)}, search space {bench.search_space}, "
        f"data seed {bench.data_seed}, "
        f"{sizes}; valid and test programs never trained on); "
        f"seeds {', '.join(map(str, bench.seeds))}; epochs "
        f"{bench.epochs if bench.epochs is not None else 'as each recipe says'}; "
        f"commit {bench.commit}"
    )
    name = "layout_ablation" if ablation else "layout_quality"
    result = {
        "world": world,
        "commit": bench.commit,
        "counts": bench.counts,
        "preset": bench.preset,
        "search_space": bench.search_space,
        "data_seed": bench.data_seed,
        "sets": {cm: str(p) for cm, p in roots.items()},
        "seeds": bench.seeds,
        "epochs": bench.epochs,
        "recipes": {k: str(v) for k, v in bench.recipes.items()},
        "baseline": bench.baseline,
        "spread": "population std over seeds",
        "results": results,
        "verdicts": entries,
    }
    atomic_write_text(bench.out / f"{name}.json", json.dumps(result, indent=1) + "\n")
    parts = [
        f"# Layout {'ablation' if ablation else 'quality'}",
        "",
        f"World: {world}. Mean ± population std over seeds; test scored once, "
        "nothing chosen on it.",
        "",
        quality.summary_table(results),
    ]
    if ablation:
        parts += [f"Against {REFERENCE}:", "", quality.ablation_table(results, REFERENCE)]
    else:
        parts += [f"Verdicts against {bench.baseline}:", "", quality.verdict_table(entries)]
    parts += ["Per test program (means over seeds):", "", quality.program_table(results)]
    text = "\n".join(parts)
    atomic_write_text(bench.out / f"{name}.md", text)
    groups, series = quality.figure_series(results)
    figure = spread_bars(groups, series, "test Kendall's tau", "Test tau (mean ± std over seeds)")
    save_png(figure, bench.out / f"{name}.png")
    print(text)
    return result


def build_parser():
    parser = entry_parser(__doc__)
    parser.add_argument(
        "--cost_models",
        default="standard",
        help=f"comma-separated cost models of the generated sets ({', '.join(COST_MODELS)})",
    )
    parser.add_argument(
        "--counts",
        default=None,
        help=f"toy-size graphs per split and collection (default {DEFAULT_COUNTS})",
    )
    parser.add_argument(
        "--preset",
        default=None,
        help=f"release-size sets instead of --counts: one of {', '.join(PRESETS)} "
        "(data/make_synthetic.py --collection layout --preset)",
    )
    parser.add_argument("--data_seed", type=int, default=0, help="seed of the generated sets")
    parser.add_argument(
        "--search_space",
        default="permutations",
        help="configurations of the release-size sets: permutations (each group free) or "
        "decisions (groups tied into a few binary decisions, as in the real files)",
    )
    parser.add_argument(
        "--collections", default="all", help=f"comma-separated ({', '.join(COLLECTIONS)}) or all"
    )
    parser.add_argument(
        "--recipes",
        default="baseline,recommended",
        help="configs/layout/<name>.flags names or .flags paths, comma-separated",
    )
    parser.add_argument(
        "--baseline", default="baseline", help="the recipe the verdicts compare the others with"
    )
    parser.add_argument("--seeds", default="0,1,2", help="training seeds, comma-separated")
    parser.add_argument(
        "--epochs", type=int, default=None, help="override every recipe's epochs (quick checks)"
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="the recommended recipe and configs/layout/ablation/*.flags instead of --recipes",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "out" / "layout_quality",
        help="sets, run scores (reused while unchanged), tables and figure",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.epochs is not None and args.epochs < 1:
        raise PipelineError(f"--epochs: must be at least 1, got {args.epochs}")
    bench = LayoutQuality(args)
    bench.out.mkdir(parents=True, exist_ok=True)
    results, roots = bench.results()
    report(bench, results, roots, args.ablation)
    return 0


if __name__ == "__main__":
    run_cli(main)
