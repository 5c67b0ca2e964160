"""Ranking (`rank_run`: `ID,TopConfigs` rows) and evaluating (`evaluate_run`) saved runs of any
collection, handed the collection's `RankingHooks`; several models score as their ensemble."""

from __future__ import annotations

import abc
import csv
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from baselines.core.args_record import parse_json_object
from baselines.core.cli import add_bool_flag
from baselines.core.data_roots import DataPlace, ranking_root
from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_write_text, check_output_file, ensure_parent
from baselines.core.ranking import ensemble_scores, ranking_cell
from baselines.core.submission import HEADER, write_csv_atomic

Log = Callable[[str], None]
BLEND = "blend"  # the ensemble of every model of a grouped evaluation
Models = list[tuple[Path, dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class Request:
    """A rank or evaluate command's flags: `dirs` comma-separated model folders (`flag`
    names them), `top` configurations per row (None: all), `options` the collection's
    own flags, `groups` named groups of the folders (e.g. a recipe's seeds), each
    evaluated as its own ensemble beside the blend of all (`<output>_items.csv`);
    `bundled_toy` reads the toy set, `max_files` the first files of the split only."""

    dirs: str
    split: str
    output: str | None
    data_root: str | None = None
    cache_dir: str | None = None
    top: int | None = None
    flag: str = "--dir"
    options: Any = None
    groups: dict[str, list[str]] | None = None
    bundled_toy: bool = False
    max_files: int | None = None

    @classmethod
    def of(cls, args: Any, flag: str) -> Request:
        """The request of a script's parsed flags; `flag` ("--dir" or "--dirs") lists the models."""
        bundled_toy = getattr(args, "bundled_toy", False)
        max_files = getattr(args, "max_files", None)
        if bundled_toy and args.data_root is not None:
            raise PipelineError(
                f"--bundled_toy=True reads the bundled toy set, not --data_root={args.data_root}; "
                "give one of the two"
            )
        if max_files is not None and max_files < 1:
            raise PipelineError(f"--max_files: must be at least 1, got {max_files}")
        return cls(
            dirs=getattr(args, flag[2:]),
            split=args.split,
            output=args.output,
            data_root=args.data_root,
            cache_dir=args.cache_dir,
            top=getattr(args, "top", None),
            flag=flag,
            options=args,
            groups=parse_groups(getattr(args, "groups_json", None)),
            bundled_toy=bundled_toy,
            max_files=max_files,
        )


@dataclasses.dataclass
class Scored:
    """A split scored by every model: `members[m][i]` is model m's scores of item i."""

    folder: Path
    ids: list[str]  # the items' file stems
    members: list[list[Any]]
    data: Any  # the collection's split or graphs, for its evaluation
    seconds: float  # the scoring time, loading and model rebuilding excluded


@dataclasses.dataclass
class Evaluation:
    """A labelled split's evaluation: the printed table and the files it writes."""

    text: str  # markdown, written as `<output>.md` and printed
    texts: dict[str, str]  # {file ending: content}, e.g. {".csv": ...}
    figures: dict[str, Any]  # {file ending: matplotlib figure}


class RankingHooks(abc.ABC):
    """What a collection hands the driver: how its runs are read and its data scored."""

    place: DataPlace  # where its data lives
    unit: str  # what one ranked list is: "kernel" or "graph"

    @abc.abstractmethod
    def read_runs(self, text: str, flag: str) -> Models:
        """(model folder, run record) of each comma-separated folder; one line if refused."""

    @abc.abstractmethod
    def folder(self, root: Path, record: dict[str, Any], split: str) -> Path:
        """The folder of `split` under `root` for runs like `record`."""

    @abc.abstractmethod
    def score(self, models: Models, folder: Path, request: Request, log: Log) -> Scored:
        """Every configuration of every item of `folder`, scored by each model."""

    @abc.abstractmethod
    def row_id(self, record: dict[str, Any], item: str) -> str:
        """The submission ID of an item (e.g. `tile:xla:<stem>`)."""

    @abc.abstractmethod
    def evaluate(self, scored: Scored, scores: dict[str, list], plan: Any) -> Evaluation:
        """The evaluation of labelled `scored` data: `scores` {label: per-item scores}."""

    def prepare(self, request: Request, output: Path, log: Log) -> None:
        """Before anything is read: e.g. the cache folder's leftovers removed."""
        return None

    def default_output(self, models: Models) -> Path:
        raise PipelineError("--output: give the CSV to write")

    def evaluation_plan(self, request: Request, folder: Path, log: Log) -> Any:
        """What the evaluation needs before scoring (e.g. subsets drawn from file headers)."""
        return None

    @abc.abstractmethod
    def item_figures(self, scored: Scored, scores: list) -> list[float]:
        """Each item's validation figure, higher is better (nan: undefined)."""

    figure_name = "figure"  # what `item_figures` measures, for tables and plots

    def labelled_summary(self, scored: Scored, scores: list, label: str) -> str:
        """What a ranking prints after its rows when the split is labelled (e.g. its errors)."""
        return ""


def _read(hooks: RankingHooks, request: Request, log: Log) -> tuple[Models, Path, str | None]:
    """The runs and the split's folder, the choice of root said through `log`."""
    models = hooks.read_runs(request.dirs, request.flag)
    first = models[0][1]
    run_root = first.get("data_root") or first.get("args", {}).get("data_root")
    root, origin, banner = ranking_root(
        hooks.place, request.data_root, run_root, bundled_toy=request.bundled_toy
    )
    if banner:
        log(banner)
    folder = hooks.folder(root, first, request.split)
    names = ", ".join(record["model"] for _, record in models)
    log(f"data: {folder} (from {origin}); model{'s' * (len(models) > 1)} {names}")
    return models, folder, banner


def rank_run(hooks: RankingHooks, request: Request, log: Log = print) -> list[tuple[str, str]]:
    """Ranks every item of `request.split` and writes `ID,TopConfigs`; returns the rows."""
    if request.top is not None and request.top < 1:
        raise PipelineError(f"--top: must be at least 1, got {request.top}")
    # A bad --output is refused now, not after the ranking; its folder is made when writing.
    output = check_output_file(Path(request.output), "--output") if request.output else None
    models, folder, banner = _read(hooks, request, log)
    if output is None:
        output = check_output_file(hooks.default_output(models), "--output")
    hooks.prepare(request, output, log)
    scored = hooks.score(models, folder, request, log)
    scores = ensemble_scores(scored.members)

    from baselines.core.metrics import require_finite_scores

    require_finite_scores(scored.ids, scores, f"{hooks.unit}s")
    first = models[0][1]
    rows = [
        (hooks.row_id(first, item), ranking_cell(s, request.top))
        for item, s in zip(scored.ids, scores, strict=True)
    ]
    write_csv_atomic(ensure_parent(output), HEADER, rows)
    configs = sum(len(s) for s in scores)
    log(f"wrote {output}: {len(rows)} {hooks.unit}s, {configs} configurations of {folder}")
    rate = len(rows) / max(scored.seconds, 1e-9)
    log(f"scored in {scored.seconds:.2f} s ({rate:.1f} {hooks.unit}s/s)")
    label = "ensemble" if len(models) > 1 else first["model"]
    summary = hooks.labelled_summary(scored, scores, label)
    if summary:
        log(summary.rstrip("\n"))
    if banner:
        log(banner)
    return rows


def evaluate_run(hooks: RankingHooks, request: Request, log: Log = print) -> Evaluation:
    """Scores a labelled split with each model and their ensemble; writes tables and figures."""
    output = check_output_file(Path(request.output), "--output")
    hooks.prepare(request, output, log)
    models, folder, banner = _read(hooks, request, log)
    plan = hooks.evaluation_plan(request, folder, log)
    scored = hooks.score(models, folder, request, log)
    scores = {f"{r['model']} {d.name}": m for (d, r), m in zip(models, scored.members)}
    if len(models) > 1:
        scores["ensemble"] = ensemble_scores(scored.members)

    from baselines.core import plots
    from baselines.core.metrics import require_finite_scores

    for label, member in scores.items():
        require_finite_scores(scored.ids, member, f"{hooks.unit}s ({label})")
    evaluation = hooks.evaluate(scored, scores, plan)
    if request.groups is not None:
        items = group_items(hooks, request, models, scored, scores)
        evaluation.texts["_items.csv"] = items_csv(items)
        evaluation.figures["_options.png"] = plots.options_per_item(
            {k: v for k, v in items.items() if not k.startswith("model ")}, hooks.figure_name
        )
    ensure_parent(output)
    written = []
    for ending, content in {".md": evaluation.text, **evaluation.texts}.items():
        atomic_write_text(output.with_name(output.name + ending), content)
        written.append(f"{output}{ending}")
    for ending, figure in evaluation.figures.items():
        written.append(str(plots.save_png(figure, output.with_name(output.name + ending))))
    log(evaluation.text.rstrip("\n"))
    log(f"wrote {', '.join(written)}")
    if banner:
        log(banner)
    return evaluation


def group_items(
    hooks: RankingHooks, request: Request, models: Models, scored: Scored, scores: dict
) -> dict[str, dict[str, float]]:
    """{row label: {item: figure}}: `model <folder>` for every model, then each group's
    ensemble under its name, then the blend of all models (`BLEND`)."""
    by_dir = {str(d): m for (d, _), m in zip(models, scored.members)}
    labels = {f"model {d.name}": m for (d, _), m in zip(models, scored.members)}
    for name, dirs in (request.groups or {}).items():
        missing = [d for d in dirs if str(Path(d).expanduser()) not in by_dir]
        if missing or not dirs:
            raise PipelineError(f"groups: {name} names {missing or 'no'} model of {request.flag}")
        labels[name] = ensemble_scores([by_dir[str(Path(d).expanduser())] for d in dirs])
    labels[BLEND] = scores.get("ensemble") or ensemble_scores(scored.members)  # one model: itself
    return {
        label: dict(zip(scored.ids, hooks.item_figures(scored, member)))
        for label, member in labels.items()
    }


def items_csv(items: dict[str, dict[str, float]]) -> str:
    """`label,item,figure` rows (figures with 6 decimals, nan where undefined)."""
    lines = ["label,item,figure"]
    for label, values in items.items():
        lines += [f"{label},{item},{value:.6f}" for item, value in values.items()]
    return "\n".join(lines) + "\n"


def read_items_csv(path: Path) -> dict[str, dict[str, float]]:
    """`items_csv`'s table back: {label: {item: figure}}."""
    items: dict[str, dict[str, float]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            items.setdefault(row["label"], {})[row["item"]] = float(row["figure"])
    return items


def add_run_flags(
    parser, flag: str, dirs_help: str, root_help: str, *, max_files: bool = False
) -> None:
    """A rank or evaluate script's model folders (`flag`: "--dir" or "--dirs"), `--data_root`,
    `--bundled_toy` and, when it takes it, `--max_files`."""
    parser.add_argument(flag, required=True, help=dirs_help)
    parser.add_argument("--data_root", default=None, help=root_help)
    add_bool_flag(
        parser,
        "--bundled_toy",
        "the bundled synthetic toy set in data/ instead of --data_root or the run's",
    )
    if max_files:
        parser.add_argument(
            "--max_files",
            type=int,
            default=None,
            help="only the first N files of the split, in file-name order (default: all)",
        )


def add_groups_flag(parser) -> None:
    """`--groups_json` of an evaluation script (the one-command job's candidate recipes)."""
    parser.add_argument(
        "--groups_json",
        default=None,
        help="named groups of --dirs, each evaluated as its own ensemble beside the blend of "
        'all, per item into <output>_items.csv, e.g. \'{"baseline": ["out/model_a"]}\'',
    )


def parse_groups(text: str | None) -> dict[str, list[str]] | None:
    """`--groups_json`'s {name: [model folder, ...]}; anything else is one line."""
    if text is None:
        return None
    groups = parse_json_object("groups_json", text, '{"baseline": ["out/model_a"]}')
    if not all(isinstance(v, list) and all(isinstance(d, str) for d in v) for v in groups.values()):
        raise PipelineError(f"--groups_json: each group must be a list of model folders: {text!r}")
    return groups


def timed(score: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = score()
    return result, time.perf_counter() - started
