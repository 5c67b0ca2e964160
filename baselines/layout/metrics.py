"""Ranking quality of layout models: Kendall's tau-b and slowdown@k per graph, program (the id
up to its first ".") and overall. numpy only."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np

from baselines.core.errors import PipelineError
from baselines.core.ranking import ranking_order
from baselines.core.tables import cell, csv_table, markdown_table
from baselines.layout.prune import graph_key

# Elements of one [rows, c] comparison block: tens of MB for any c ([c, c]: GBs at 60k).
_BLOCK_ELEMENTS = 1 << 22


def _as_vectors(pred: np.ndarray, runtime: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pred = np.asarray(pred)
    runtime = np.asarray(runtime)
    if pred.ndim != 1 or pred.shape != runtime.shape:
        raise PipelineError(
            f"predictions have shape {pred.shape} but runtimes {runtime.shape}; "
            "pass one score per configuration of the graph"
        )
    for name, x in (("predictions", pred), ("runtimes", runtime)):
        if x.dtype.kind == "f" and not np.all(np.isfinite(x)):
            raise PipelineError(f"{name} contain NaN or inf; check the model's output")
    return pred, runtime


def _signs(block: np.ndarray, x: np.ndarray) -> np.ndarray:
    """sign(block[i] - x[j]) as int8, by comparison (a difference could overflow)."""
    return (block[:, None] > x[None, :]).astype(np.int8) - (block[:, None] < x[None, :])


def kendall_tau(pred: np.ndarray, runtime: np.ndarray) -> float:
    """Kendall's tau-b, (concordant - discordant) / sqrt((P - ties_pred) * (P - ties_runtime))
    over the P pairs, a block of rows at a time; NaN below 2 configurations or if constant."""
    pred, runtime = _as_vectors(pred, runtime)
    c = pred.size
    if c < 2:
        return float("nan")
    pred = pred.astype(np.float64) if pred.dtype.kind == "f" else pred.astype(np.int64)
    runtime = runtime.astype(np.float64) if runtime.dtype.kind == "f" else runtime.astype(np.int64)
    rows = max(1, _BLOCK_ELEMENTS // c)
    agree = untied_pred = untied_runtime = 0
    for start in range(0, c, rows):
        sp = _signs(pred[start : start + rows], pred)
        sr = _signs(runtime[start : start + rows], runtime)
        agree += int(np.einsum("ij,ij->", sp, sr, dtype=np.int64))
        untied_pred += int(np.count_nonzero(sp))
        untied_runtime += int(np.count_nonzero(sr))
    if untied_pred == 0 or untied_runtime == 0:
        return float("nan")
    return float(agree / np.sqrt(float(untied_pred) * float(untied_runtime)))


def slowdown_at_k(pred: np.ndarray, runtime: np.ndarray, k: int) -> float:
    """min(runtime of the k lowest-scored configs) / min(runtime) - 1, 0 perfect, ties in file
    order; runtimes must be positive (test files are refused)."""
    pred, runtime = _as_vectors(pred, runtime)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise PipelineError(f"k must be an integer >= 1, got {k!r}")
    if runtime.size == 0:
        raise PipelineError("no configurations to rank")
    best = runtime.min()
    if best <= 0:
        raise PipelineError(
            "runtimes must be positive to measure a slowdown; test files hold no runtimes (all 0)"
        )
    picked = runtime[ranking_order(pred)[: int(k)]].min()
    return float(np.float64(picked) / np.float64(best) - 1.0)


SLOWDOWN_KS = (1, 10, 100)
ALL = "ALL"
COLUMNS = (
    "model",
    "configs",
    "level",
    "name",
    "graphs",
    "configurations",
    "kendall_tau",
    *(f"slowdown_{k}" for k in SLOWDOWN_KS),
)
# Mixed into the subsets' random stream: a subset is not a run's `max_configs` sample.
_SUBSET_STREAM = 1


def program_of(graph_id: str) -> str:
    """A graph's program: its id up to the first "." (`unet_3d.4x4.bf16` -> `unet_3d`)."""
    return graph_id.split(".", 1)[0]


def graph_figures(scores: np.ndarray, runtimes: np.ndarray) -> dict[str, float]:
    """{"kendall_tau": ..., "slowdown_<k>": ...} of one graph's scores against its runtimes."""
    figures = {"kendall_tau": kendall_tau(scores, runtimes)}
    for k in SLOWDOWN_KS:
        figures[f"slowdown_{k}"] = slowdown_at_k(scores, runtimes, k)
    return figures


def _mean_row(per_graph: Sequence[dict]) -> dict:
    taus = [r["kendall_tau"] for r in per_graph if np.isfinite(r["kendall_tau"])]
    row = {
        "graphs": len(per_graph),
        "configurations": sum(r["configurations"] for r in per_graph),
        "kendall_tau": float(np.mean(taus)) if taus else float("nan"),
    }
    for k in SLOWDOWN_KS:
        row[f"slowdown_{k}"] = float(np.mean([r[f"slowdown_{k}"] for r in per_graph]))
    return row


def _model_rows(label: str, configs: str, graph_ids: Sequence[str], scores, runtimes) -> list[dict]:
    per_graph = []
    for graph_id, s, r in zip(graph_ids, scores, runtimes, strict=True):
        if not np.all(np.isfinite(np.asarray(s, dtype=np.float64))):
            raise PipelineError(f"{graph_id}: model {label} gave non-finite scores")
        per_graph.append(
            {
                "level": "graph",
                "name": graph_id,
                "graphs": 1,
                "configurations": int(np.asarray(r).size),
                **graph_figures(np.asarray(s), np.asarray(r)),
            }
        )
    groups: dict[str, list[dict]] = {}
    for row in per_graph:
        groups.setdefault(program_of(row["name"]), []).append(row)
    rows = [{"level": "all", "name": ALL, **_mean_row(per_graph)}]
    rows += [
        {"level": "program", "name": p, **_mean_row(group)} for p, group in sorted(groups.items())
    ]
    rows += per_graph
    return [{"model": label, "configs": configs, **row} for row in rows]


def evaluation_rows(
    graph_ids: Sequence[str],
    runtimes: Sequence[np.ndarray],
    scores_by_model: Mapping[str, Sequence[np.ndarray]],
    subsets: Mapping[str, np.ndarray] | None = None,
) -> list[dict]:
    """Rows of COLUMNS per model: "ALL", each program, each graph, the first two means over
    graphs (tau where defined). `configs`: "all", then "subset" with `subsets` (graph id ->
    config indices: scores and runtimes taken there). Runtimes must be positive."""
    graph_ids = [str(g) for g in graph_ids]
    if not graph_ids:
        raise PipelineError("no graphs to evaluate")
    if len(runtimes) != len(graph_ids):
        raise PipelineError(f"{len(graph_ids)} graphs but {len(runtimes)} runtime arrays")
    for graph_id, r in zip(graph_ids, runtimes):
        if not np.all(np.asarray(r) > 0):
            raise PipelineError(
                f"{graph_id}: runtimes are not all positive (a test file hides them as 0); "
                "evaluate a labelled split (valid or train)"
            )
    for label, scores in scores_by_model.items():
        if len(scores) != len(graph_ids):
            raise PipelineError(
                f"model {label}: {len(scores)} graphs scored, {len(graph_ids)} given"
            )
    blocks = [("all", lambda i, values: values)]
    if subsets is not None:
        missing = [g for g in graph_ids if g not in subsets]
        if missing:
            raise PipelineError(f"no subset for graph(s) {', '.join(missing)}")
        blocks.append(("subset", lambda i, values: np.asarray(values)[subsets[graph_ids[i]]]))
    rows = []
    for configs, take in blocks:
        kept_runtimes = [take(i, r) for i, r in enumerate(runtimes)]
        for label, scores in scores_by_model.items():
            kept = [take(i, s) for i, s in enumerate(scores)]
            rows += _model_rows(label, configs, graph_ids, kept, kept_runtimes)
    return rows


def choose_subsets(config_counts: Mapping[str, int], size: int, seed: int) -> dict[str, np.ndarray]:
    """Graph id -> sorted indices of at most `size` of its configurations (by `seed` and id)."""
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
        raise PipelineError(f"--subset_size: must be an integer >= 1, got {size!r}")
    if int(seed) < 0:
        raise PipelineError(f"--subset_seed: must be >= 0, got {seed}")
    subsets = {}
    for graph_id, count in config_counts.items():
        if count <= size:
            subsets[graph_id] = np.arange(count, dtype=np.int64)
            continue
        rng = np.random.default_rng([int(seed), graph_key(graph_id), _SUBSET_STREAM])
        subsets[graph_id] = np.sort(rng.choice(count, size=int(size), replace=False))
    return subsets


def subsets_json(subsets: Mapping[str, np.ndarray], seed: int | None, size: int | None) -> str:
    """The subsets as JSON {"seed", "size", "subsets": {id: [sorted indices]}}, a graph a line."""
    lines = [
        f"  {json.dumps(g)}: {json.dumps([int(i) for i in np.sort(idx)])}"
        for g, idx in sorted(subsets.items())
    ]
    head = f'{{\n "seed": {json.dumps(seed)},\n "size": {json.dumps(size)},\n "subsets": {{\n'
    return head + ",\n".join(lines) + "\n }\n}\n"


def parse_subsets(
    text: str, where: str, config_counts: Mapping[str, int]
) -> tuple[dict[str, np.ndarray], int | None, int | None]:
    """(subsets, seed, size) of a recorded subsets file, checked against the split's
    `config_counts` (graph id -> configurations); a misfit is one line naming `where`."""
    fix = "pass a file written by layout_evaluate.py for this split, or leave --subsets out"
    try:
        record = json.loads(text)
    except ValueError as e:
        raise PipelineError(f"{where}: not JSON ({e}); {fix}") from None
    if not isinstance(record, dict) or not isinstance(record.get("subsets"), dict):
        raise PipelineError(f'{where}: no "subsets" object of graph id -> indices; {fix}')
    given = record["subsets"]
    unknown = sorted(set(given) - set(config_counts))
    if unknown:
        raise PipelineError(
            f"{where}: graph {unknown[0]} is not in the split ({len(unknown)} unknown); {fix}"
        )
    missing = sorted(set(config_counts) - set(given))
    if missing:
        raise PipelineError(f"{where}: no subset for graph {missing[0]} of the split; {fix}")
    subsets = {}
    for graph_id, count in config_counts.items():
        indices = given[graph_id]
        if (
            not isinstance(indices, list)
            or not indices
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in indices)
        ):
            raise PipelineError(f"{where}: {graph_id}: expected a non-empty list of integers")
        bad = [i for i in indices if not 0 <= i < count]
        if bad:
            raise PipelineError(
                f"{where}: {graph_id}: config index {bad[0]} out of range (the graph has "
                f"{count} configurations); {fix}"
            )
        if len(set(indices)) != len(indices):
            raise PipelineError(f"{where}: {graph_id}: a config index is listed twice; {fix}")
        subsets[graph_id] = np.sort(np.asarray(indices, dtype=np.int64))
    seed, size = record.get("seed"), record.get("size")
    return (
        subsets,
        seed if isinstance(seed, int) else None,
        size if isinstance(size, int) else None,
    )


def markdown(rows: Sequence[dict]) -> str:
    """One table per `configs` block ("all", "subset"), each under its own heading."""
    titles = {"all": "All configurations", "subset": "Fixed subsets of configurations"}
    parts = []
    for configs in dict.fromkeys(r["configs"] for r in rows):
        block = [[cell(r[c]) for c in COLUMNS] for r in rows if r["configs"] == configs]
        parts.append(f"## {titles.get(configs, configs)}\n\n" + markdown_table(COLUMNS, block))
    return "\n".join(parts)


def csv_text(rows: Sequence[dict]) -> str:
    return csv_table(COLUMNS, [[cell(r[c]) for c in COLUMNS] for r in rows])
