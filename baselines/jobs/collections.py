"""One collection as the runners (sweeps, the submission job) see it: a `CollectionSpec`, every
difference between collections a field. No TensorFlow or Beam."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the repository: its scripts, recipes and toy sets

Result = Mapping[str, Any]  # a sweep's result of one run (`sweeps.run_one`)


@dataclasses.dataclass(frozen=True)
class CollectionSpec:
    """How the project's scripts train, evaluate and rank one collection, and summarize it.
    Sweeps: `metric_cells(result)` gives `metric_columns`' values, `summarize(record)` a run
    record's result fields (with `best_epoch`, `epochs_run`), `sort_key` orders runs best first,
    `done_line` logs one; `ensemble_key` keeps the ensemble to runs with the best run's key."""

    name: str  # "tile:xla", "layout:nlp:default"; "layout": any layout collection (sweeps)
    kind: str  # "tile" or "layout": the run files' kind, the download group, the cache folder
    args_type: type  # the training script's args record: its flags and run hash
    train_script: str
    evaluate_script: str
    predict_script: str
    train_function: str  # "module:function", imported in the Beam workers
    # The submission job.
    recipe: Path  # the recommended recipe's flagfile
    release_root: str  # the data root under the job's --data_root, e.g. "npz/tile/xla"
    toy_root: Path  # the bundled toy set's root
    join_flag: str  # create_kaggle_csv.py's flag that takes that root
    data_subdir: str  # its train/valid/test folders under the root ("" or "xla/default")
    toy_flags: tuple[str, ...]  # the training's flags on the toy sets
    collection_flags: tuple[str, ...]  # the training's flags that pick the collection
    report_metrics: Mapping[str, str]  # evaluation.csv columns in the report: their headings
    figure: str  # the evaluation's figure in the report
    training_weight: float  # a training's cost at the real size, relative to layout:xla's
    # Sweeps.
    metric_columns: tuple[str, ...]
    metric_cells: Callable[[Result], Sequence[float]]
    summarize: Callable[[Mapping[str, Any]], dict[str, Any]]
    sort_key: Callable[[Result], tuple]
    ranking: str
    done_line: Callable[[Result], str]
    named_sweeps: Mapping[str, Callable[[], Any]] = dataclasses.field(default_factory=dict)
    named_help: str = ""  # --sweep's help on the named sweeps, e.g. "paper (the paper's grid), "
    default_sweep: str | None = None
    sweep_example: str = '[{"seed": 0}, {"seed": 1, "lr": 0.01}]'
    ensemble_key: Callable[[Result], Any] | None = None
    choice_figure: str = "validation figure"  # what the job's choice compares per item

    @property
    def slug(self) -> str:  # its folder under the job's --out
        return self.name.replace(":", "_")

    @property
    def download_command(self) -> str:
        return f"python echo_download_commands.py --collections {self.kind}"

    def root(self, data_root: Path, toy: bool) -> Path:
        """Its data root under the job's `--data_root` (or the bundled toy set)."""
        return self.toy_root if toy else data_root / self.release_root

    def folder(self, data_root: Path, toy: bool) -> Path:
        root = self.root(data_root, toy)
        return root / self.data_subdir if self.data_subdir else root

    def data_flags(self, data_root: Path, toy: bool) -> tuple[str, ...]:
        return (f"--data_root={self.root(data_root, toy)}", *(self.toy_flags if toy else ()))
