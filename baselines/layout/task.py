"""The layout task: the conductor's hooks (`LayoutTask`), `LayoutRanking` and `train`.
Its flags are `layout_args.LayoutTrainArgs`; no TensorFlow at import time."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from baselines.core.data_roots import data_identity, toy_banner, training_root
from baselines.core.errors import PipelineError
from baselines.core.io_utils import read_user_text
from baselines.core.rank_run import Evaluation, RankingHooks, Request, Scored, rank_run, timed
from baselines.core.task import Loaded, Task
from baselines.layout import metrics
from baselines.layout.cache import prepare_cache_dir
from baselines.layout.data import list_layout_files, read_config_count
from baselines.layout.graph import LayoutGraph
from baselines.layout.layout_args import LAYOUT_PLACE, LayoutTrainArgs, check_run
from baselines.layout.metrics import kendall_tau
from baselines.layout.run_data import build_model, load_run_split, max_configs_note


class LayoutRanking(RankingHooks):
    """A layout collection for the ranking driver (`core/rank_run.py`): every configuration."""

    place, unit = LAYOUT_PLACE, "graph"

    def read_runs(self, text: str, flag: str):
        from baselines.layout.run_data import read_layout_models

        return read_layout_models(text, flag)

    def folder(self, root: Path, record: dict, split: str) -> Path:
        return root / record["source"] / record["search"] / split

    def prepare(self, request, output: Path, log) -> None:
        prepare_cache_dir(request.cache_dir)

    def default_output(self, models) -> Path:
        first_dir, first = models[0]
        return first_dir.parent / f"layout_{first['source']}_{first['search']}_predictions.csv"

    def score(self, models, folder: Path, request, log) -> Scored:
        from baselines.layout.scoring import score_runs

        (graphs, members), seconds = timed(
            lambda: score_runs(
                models, folder, log=log, cache_dir=request.cache_dir, max_files=request.max_files
            )
        )
        return Scored(folder, [g.graph_id for g in graphs], members, graphs, seconds)

    def row_id(self, record: dict, item: str) -> str:
        return f"layout:{record['source']}:{record['search']}:{item}"

    figure_name = "Kendall's tau"

    def item_figures(self, scored: Scored, scores: list) -> list[float]:
        return [kendall_tau(s, g.config_runtime) for g, s in zip(scored.data, scores, strict=True)]

    def labelled_summary(self, scored: Scored, scores: list, label: str) -> str:
        if scored.folder.name != "valid":
            return ""
        taus = [kendall_tau(s, g.config_runtime) for g, s in zip(scored.data, scores)]
        return f"valid Kendall tau (mean over {len(taus)} graphs): {np.nanmean(taus):.4f}"

    def evaluation_plan(self, request, folder: Path, log):
        """(subsets, seed, size): drawn from the files' headers, or read from `--subsets`."""
        options = request.options
        if options.subset_size < 1 or options.subset_seed < 0:
            raise PipelineError(
                f"--subset_size must be >= 1 and --subset_seed >= 0, got {options.subset_size} "
                f"and {options.subset_seed}"
            )
        files = list_layout_files(folder, request.max_files)
        counts = {p.stem: read_config_count(p) for p in files}
        if options.subsets:
            where = Path(options.subsets).expanduser()
            text = read_user_text(where, "--subsets", "subsets file ")
            log(f"subsets: read from {where}")
            return metrics.parse_subsets(text, str(where), counts)
        size = options.subset_size
        return metrics.choose_subsets(counts, size, options.subset_seed), options.subset_seed, size

    def evaluate(self, scored: Scored, scores: dict[str, list], plan) -> Evaluation:
        from baselines.core import plots

        subsets, seed, size = plan
        runtimes = [g.config_runtime for g in scored.data]
        rows = metrics.evaluation_rows(scored.ids, runtimes, scores, subsets)
        shown = "ensemble" if "ensemble" in scores else next(iter(scores))
        texts = {
            ".csv": metrics.csv_text(rows),
            "_subsets.json": metrics.subsets_json(subsets, seed, size),
        }
        figures = {
            "_tau_per_graph.png": plots.tau_per_graph(rows),
            "_pred_vs_true.png": plots.predicted_vs_true(
                scores[shown], runtimes, shown, unit="graph"
            ),
        }
        return Evaluation(metrics.markdown(rows), texts, figures)


class LayoutTask(Task):
    """A layout collection for the conductor (`core/conductor.py`): graphs ranked by tau."""

    collection, unit = "layout", "graph"
    not_hparams = tuple(sorted(LayoutTrainArgs.NOT_HASHED))  # where things go, not what trains

    def __init__(self, graphs=None, validate_all: bool = True):
        """`graphs`: (train, valid) graphs already read, used instead of `--data_root`;
        `validate_all=False` leaves out the final validation (no "val" in the record)."""
        self.graphs, self.validate_all = graphs, validate_all

    hparams_metrics = (
        ("epoch_kendall_tau", "validation", "val Kendall tau (sampled configs)"),
        ("epoch_opa", "validation", "val OPA"),
        ("epoch_loss", "validation", "val loss"),
        ("epoch_loss", "train", "train loss"),
    )

    def check(self, args: LayoutTrainArgs, log) -> None:
        """The flags, data root and folders, then the model's name and kwargs (it is built)."""
        check_run(args, log)
        build_model(args.model, args.model_kwargs())

    def load(self, args: LayoutTrainArgs, progress: bool, log) -> Loaded:
        if self.graphs is not None:
            loaded = prepared(*self.graphs)
            loaded.facts.update(source=args.source, search=args.search, data_root=None)
            return loaded
        root, toy, toy_fallback = training_root(LAYOUT_PLACE, args.data_root, log)
        folder = args.collection_dir(root)
        log(f"layout:{args.source}:{args.search} from {folder}; run {args.run_hash()}")
        train_graphs, valid_graphs = load_train_graphs(args, folder, log)
        source = data_identity(folder, ("train", "valid"), args.max_files, "layout", toy_fallback)
        facts = dict(bundled_toy=toy, data_root=str(root), source=args.source, search=args.search)
        loaded = prepared(train_graphs, valid_graphs)
        loaded.facts.update(facts, data=source)
        loaded.identity, loaded.toy_fallback = source["identity"], toy_fallback
        loaded.notice = (
            toy_banner(LAYOUT_PLACE, "--data_root is the bundled toy set") if toy else None
        )
        return loaded

    def most_configs(self, loaded: Loaded) -> int:
        return max(g.num_configs for g in loaded.train)

    def batches(self, args: LayoutTrainArgs, loaded: Loaded, configs: int, replicas: int):
        """Train batches of segments of `keep_nodes` nodes (None: whole graphs); validation
        batches, the first `--validate_batches` of one fixed sample (<= 0: all)."""
        from baselines.core.keras_fit import EpochBatches
        from baselines.layout.batching import batch_source, segment_source

        train, seed, micro = loaded.train, args.seed, args.micro_batch
        if micro and replicas > 1:
            raise PipelineError(
                f"--micro_batch={micro} trains on one replica only, and this strategy has "
                f"{replicas}; leave --micro_batch at 0 or train on one device"
            )
        keep = args.keep_nodes
        source = (
            batch_source(train)
            if keep is None
            else segment_source(train, keep, seed, per_graph=micro > 0)
        )
        return (
            EpochBatches(source, args.batch, configs, seed, num_replicas=replicas, micro=micro),
            EpochBatches(
                batch_source(loaded.valid),
                args.batch,
                configs,
                seed + 1,
                fixed_epoch=0,
                max_steps=args.validate_batches,
                num_replicas=replicas,
            ),
        )

    def build_model(self, args: LayoutTrainArgs, configs: int):
        return build_model(args.model, args.model_kwargs()).create_variables()

    def to_model_inputs(self, batch):
        from baselines.layout.batching import to_model_inputs

        return to_model_inputs(batch)

    def callbacks(self, val_batches):
        from baselines.layout.scoring import ValidationKendallTau

        return [ValidationKendallTau(val_batches)], ("val_kendall_tau",)

    def run_label(self, args: LayoutTrainArgs, run_hash: str) -> str:
        return f"{args.model}-{args.source}:{args.search}-{run_hash[:8]}"

    def evaluate(self, args: LayoutTrainArgs, model, loaded: Loaded, record, progress, log):
        """Kendall's tau, OPA and slowdown over every configuration of every valid graph."""
        from baselines.layout.scoring import evaluate_graphs

        if not self.validate_all:
            return {}, None
        val, seconds = timed(lambda: evaluate_graphs(model, loaded.valid))
        averaged = record["averaged_epochs"]
        ended_on = (
            f"the mean of the weights of its last {averaged} epochs"
            if averaged
            else f"best epoch {record['best_epoch']}"
        )
        log(
            f"trained {args.model} in {record['timings']['train_s'] + seconds:.1f} s, "
            f"{ended_on}: validation Kendall tau {val['kendall_tau']:.4f}, "
            f"OPA {val['opa']:.4f} over {val['graphs']} graphs"
        )
        return {"val": val, "timings": {"val_eval_s": seconds}}, None


def prepared(train_graphs: Sequence[LayoutGraph], valid_graphs: Sequence[LayoutGraph]) -> Loaded:
    """The graphs of a run, prepared for batching; both splits need graphs with runtimes."""
    from baselines.layout.batching import prepare_graphs

    if not train_graphs or not valid_graphs:
        raise PipelineError("a layout run needs at least one train and one validation graph")
    if any(not g.has_labels for g in [*train_graphs, *valid_graphs]):
        raise PipelineError("train and validation graphs need runtimes (test files hold none)")
    return Loaded(
        prepare_graphs(train_graphs),
        prepare_graphs(valid_graphs),
        facts={
            "train_graphs": [g.graph_id for g in train_graphs],
            "valid_graphs": [g.graph_id for g in valid_graphs],
        },
    )


def load_train_graphs(
    args: LayoutTrainArgs, folder: Path, log
) -> tuple[list[LayoutGraph], list[LayoutGraph]]:
    """The train and validation graphs of a run, reduced as its args say."""
    reduce = dict(**args.split_kwargs(), log=log)
    train_graphs = load_run_split(folder / "train", training=True, **reduce)
    valid_graphs = load_run_split(folder / "valid", training=True, **reduce)
    graphs = [*train_graphs, *valid_graphs]
    note = max_configs_note(args.max_configs, graphs, distinct=args.drop_duplicates)
    if note:
        log(note)  # the flag stays in the run hash and run file as given
    return train_graphs, valid_graphs


def results_csv_path(args: LayoutTrainArgs) -> Path:
    """Where layout_train.py writes the test split's rankings: `--results_csv`, else upstream's
    `<out_dir>/results_<ms timestamp>_<source>_<search>.csv`."""
    if args.results_csv:
        return Path(args.results_csv).expanduser()
    stamp = int(time.time() * 1000)
    return Path(args.out_dir).expanduser() / f"results_{stamp}_{args.source}_{args.search}.csv"


def rank_test_split(args: LayoutTrainArgs, record: dict, log=print) -> Path | None:
    """layout_train.py's last step, as upstream's: the saved run ranks every test graph (the first
    `--max_files`) into `results_csv_path` (`rank_run`); None with `--results_csv=None` or, said
    through `log`, without test files."""
    if not args.ranks_test:
        return None
    root = Path(record["data_root"])
    folder = args.collection_dir(root) / "test"
    if not any(folder.glob("*.npz")):
        log(f"no test files in {folder}: no results CSV")
        return None
    output = results_csv_path(args)
    model_dir = Path(args.out_dir).expanduser() / f"model_{record['run_hash']}"
    request = Request(
        dirs=str(model_dir),
        split="test",
        output=str(output),
        data_root=str(root),
        cache_dir=args.cache_dir,
        max_files=args.max_files,
    )
    rank_run(LayoutRanking(), request, log)
    return output


def train(args: LayoutTrainArgs, *, strategy=None, progress: bool = False, log=print) -> dict:
    """Trains and saves one layout run as `layout_train.py` does; returns its run record:
    record = train(LayoutTrainArgs(epochs=2, out_dir="out/layout"))
    record["run_hash"], record["val"]["kendall_tau"]
    """
    from baselines.core.conductor import train_run

    task = LayoutTask(validate_all=args.final_validation)
    return train_run(task, args, strategy=strategy, progress=progress, log=log)
