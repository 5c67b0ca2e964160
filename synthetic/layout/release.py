"""Layout sets sized like the real release: graph counts, node and config counts per graph.

A preset ("release", "release_half", "release_quarter", "release_eighth") scales
the real graph counts per split (at least 1 per split); the per-graph sizes stay
those of the release. The plan is cheap (no graph is built), so tests can check
the sizes a preset would write without writing it:

    plan = release_plan("release_eighth", "xla:default")
    plan["train"][0]  # (nodes, configs) of train graph 0
    write_release_dataset(Path("/tmp/rel"), "release_eighth", seed=0, collections=["nlp:default"])

Sizes of a split of n graphs: node counts are the log-normal quantiles at
(k + 0.5) / n, k = 0..n-1 in a seeded order, scaled so that their mean is the
target exactly (then rounded, never below `min_nodes`); config counts are spread
evenly over [configs_low, configs_high] in another seeded order; test graphs get
`test_configs` each. So every split of every preset has the target means, and a
larger preset has longer tails. A split's plan depends on its graph count, so the
default and random collections of a source share their valid and test programs
(equal counts) and not their train programs (61 vs 69 xla graphs).

Each file is a pure function of (seed, source, search, split, index, its planned
sizes, cost model, search space) and is written by one task of a process pool: the
same bytes whatever the number of workers.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import os
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_directory
from synthetic.layout.cost_model import RELEASE_NOISE_SIGMA, cost_constants
from synthetic.layout.decisions import SEARCH_SPACES, decision_configs
from synthetic.layout.generate import (
    DUPLICATE_FRACTION,
    SEARCHES,
    SOURCES,
    SPLITS,
    _add_duplicates,
    _groups,
    _rng,
    looks_like_layout_set,
    program_arrays,
    random_configs,
    write_npz,
)
from synthetic.layout.programs import FAMILIES, Program, build_sized_program

PRESETS = {"release": 1.0, "release_half": 0.5, "release_quarter": 0.25, "release_eighth": 0.125}
# Files per split (train, valid, test) of the real layout collections.
RELEASE_COUNTS: dict[str, dict[str, int]] = {
    "xla:random": {"train": 69, "valid": 7, "test": 8},
    "xla:default": {"train": 61, "valid": 7, "test": 8},
    "nlp:random": {"train": 207, "valid": 20, "test": 17},
    "nlp:default": {"train": 198, "valid": 20, "test": 17},
}
COLLECTIONS = tuple(RELEASE_COUNTS)
# Stream keys of the plan's two orders (apart from every file's generator).
_NODE_ORDER, _CONFIG_ORDER = 0x10DE, 0xC0F1


@dataclasses.dataclass(frozen=True)
class SizeTargets:
    """Per-graph size targets of a source: mean nodes (log-normal), configs per graph.

    SizeTargets(14_105, 0.6, 2_000, 10_000, 12_000, 1_000).configs_mean == 11_000
    """

    nodes_mean: float
    nodes_sigma: float
    min_nodes: int
    configs_low: int
    configs_high: int
    test_configs: int

    @property
    def configs_mean(self) -> float:
        return (self.configs_low + self.configs_high) / 2


# xla: 14,105 nodes and 10-12k configs per graph, as the real release. nlp: 5,659
# nodes; 9,000-11,000 configs per graph (the real 56-66k are ~6x: see data/README.md).
RELEASE_TARGETS: dict[str, SizeTargets] = {
    "xla": SizeTargets(14_105, 0.6, 2_000, 10_000, 12_000, 1_000),
    "nlp": SizeTargets(5_659, 0.5, 1_000, 9_000, 11_000, 1_000),
}


def nlp_targets(configs: tuple[int, int] | None) -> SizeTargets:
    """The nlp targets with train/valid configurations per graph in `configs` (low, high).

    None keeps 9,000-11,000; the real release holds 56,000-66,000:
        nlp_targets((56_000, 66_000)).configs_mean == 61_000
    """
    if configs is None:
        return RELEASE_TARGETS["nlp"]
    low, high = configs
    if not 1 <= low <= high:
        raise PipelineError(f"--nlp_configs {low},{high}: need 1 <= LOW <= HIGH, e.g. 56000,66000")
    return dataclasses.replace(RELEASE_TARGETS["nlp"], configs_low=low, configs_high=high)


def parse_nlp_configs(text: str | None) -> tuple[int, int] | None:
    """A --nlp_configs value "LOW,HIGH" as two integers, checked by `nlp_targets`.

    parse_nlp_configs("56000,66000") == (56_000, 66_000); parse_nlp_configs(None) is None
    """
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise PipelineError(f"--nlp_configs {text!r}: expected LOW,HIGH, e.g. 56000,66000")
    configs = (int(parts[0]), int(parts[1]))
    nlp_targets(configs)  # 1 <= LOW <= HIGH, or one line saying so
    return configs


def check_search_space(name: str) -> None:
    """One line for an unknown search space name."""
    if name not in SEARCH_SPACES:
        raise PipelineError(
            f"unknown search space {name!r}; choose one of {', '.join(SEARCH_SPACES)}"
        )


def _check_collection(collection: str) -> tuple[str, str]:
    if collection not in RELEASE_COUNTS:
        raise PipelineError(
            f"unknown layout collection {collection!r}; choose from {', '.join(COLLECTIONS)}"
        )
    source, search = collection.split(":")
    return source, search


def preset_counts(preset: str, collection: str) -> dict[str, int]:
    """Graphs per split of a preset: the release counts scaled, rounded half up, at least 1.

    preset_counts("release_eighth", "xla:default") == {"train": 8, "valid": 1, "test": 1}
    """
    if preset not in PRESETS:
        raise PipelineError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    _check_collection(collection)
    scale = PRESETS[preset]
    return {
        s: max(1, int(math.floor(c * scale + 0.5))) for s, c in RELEASE_COUNTS[collection].items()
    }


def _order(seed: int, source: str, split: str, stream: int, n: int) -> np.ndarray:
    seq = np.random.SeedSequence([seed, SOURCES.index(source), SPLITS.index(split), stream])
    return np.random.default_rng(seq).permutation(n)


def split_plan(
    seed: int, source: str, search: str, split: str, count: int, targets: SizeTargets
) -> list[tuple[int, int]]:
    """(nodes, configs) of each of the `count` graphs of one split (see the module doc).

    split_plan(0, "nlp", "default", "valid", 3, RELEASE_TARGETS["nlp"])[0][1] >= 9_000
    """
    if count <= 0:
        return []
    strata = (np.arange(count) + 0.5) / count
    z = np.array([statistics.NormalDist().inv_cdf(float(u)) for u in strata])
    raw = np.exp(targets.nodes_sigma * z)[_order(seed, source, split, _NODE_ORDER, count)]
    nodes = np.maximum(np.rint(raw / raw.mean() * targets.nodes_mean), targets.min_nodes)
    if split == "test":
        configs = np.full(count, targets.test_configs)
    else:
        spread = targets.configs_high - targets.configs_low
        order = _order(seed, source, split, _CONFIG_ORDER + SEARCHES.index(search), count)
        configs = np.rint(targets.configs_low + spread * strata[order])
    return [(int(n), int(c)) for n, c in zip(nodes, configs)]


def release_plan(
    preset: str, collection: str, seed: int = 0, targets: SizeTargets | None = None
) -> dict[str, list[tuple[int, int]]]:
    """Per split, the (nodes, configs) of every graph a preset writes for a collection.

    Cheap (nothing is built); `targets` replaces the source's release targets (tests):
        sum(c for _, c in release_plan("release", "xla:random")["train"])
    """
    source, search = _check_collection(collection)
    targets = targets or RELEASE_TARGETS[source]
    counts = preset_counts(preset, collection)
    return {s: split_plan(seed, source, search, s, counts[s], targets) for s in SPLITS}


def sized_default_configs(rng: np.random.Generator, program: Program, c: int) -> np.ndarray:
    """`default` search configurations of a large program, vectorised over rows.

    Row 0 is the compiler's layouts (reshapes keep half their groups at -1); every
    other row changes 1 + Poisson(min(0.15 * groups, 4)) groups (drawn with
    replacement) of it by swapping two adjacent dims (the two most-minor 60% of the
    time): sized_default_configs(rng, program, 1000).shape == (1000, nc, 18)
    """
    nc = program.node_config_ids.size
    groups = _groups(program)
    base = np.full((nc, 18), -1, dtype=np.float32)
    explicit = rng.random(nc) < 0.5
    for j, group, layout, is_reshape in groups:
        if not is_reshape or explicit[j]:
            base[j, group * 6 : group * 6 + len(layout)] = layout
    feat = np.repeat(base[None], c, axis=0)
    movable = [g for g in groups if len(g[2]) >= 2]
    if not movable or c < 2:
        return feat
    changes = 1 + rng.poisson(min(0.15 * len(movable), 4.0), size=c - 1)
    rows = np.repeat(np.arange(1, c), changes)
    picks = rng.integers(len(movable), size=rows.size)
    minor = rng.random(rows.size) < 0.6
    position = rng.random(rows.size)
    for g in np.unique(picks).tolist():
        j, group, layout, _ = movable[g]
        sel = picks == g
        r = len(layout)
        p = np.where(minor[sel], 0, np.floor(position[sel] * (r - 1)).astype(np.int64))
        new = np.tile(np.asarray(layout, dtype=np.float32), (p.size, 1))
        at = np.arange(p.size)
        new[at, p], new[at, p + 1] = new[at, p + 1], new[at, p].copy()
        feat[rows[sel], j, group * 6 : group * 6 + r] = new
    return feat


def generate_planned_file(
    seed: int,
    source: str,
    search: str,
    split: str,
    index: int,
    size: tuple[int, int],
    test_labels: bool = False,
    cost_model: str = "standard",
    search_space: str = "permutations",
) -> tuple[str, dict[str, np.ndarray]]:
    """The graph id and arrays of one release-size file with exactly `size` = (nodes, configs).

    `search_space` "permutations" writes `random_configs` / `sized_default_configs`;
    "decisions" writes `decisions.decision_configs` (the real files' shape):
    generate_planned_file(0, "nlp", "random", "train", 0, (1_000, 50))[1]["node_opcode"].size
    """
    nodes, configs = size
    cost_constants(cost_model)
    check_search_space(search_space)
    families = FAMILIES[source][split]
    family = families[index % len(families)]
    program_rng = _rng(seed, SOURCES.index(source), SPLITS.index(split), index, nodes)
    program = build_sized_program(program_rng, source, family, nodes)
    rng = _rng(
        seed, SOURCES.index(source), SPLITS.index(split), index, nodes, 1 + SEARCHES.index(search)
    )
    if search_space == "decisions":
        feat = decision_configs(rng, program, configs, search, cost_model)
    else:
        make = random_configs if search == "random" else sized_default_configs
        feat = make(rng, program, configs)
    _add_duplicates(rng, feat, DUPLICATE_FRACTION[search])
    arrays = program_arrays(program, feat, rng, split, test_labels, cost_model, RELEASE_NOISE_SIGMA)
    return f"{family}_{program.etype.name}_{index:03d}", arrays


@dataclasses.dataclass(frozen=True)
class FileInfo:
    """What was written for one release-size file."""

    collection: str
    split: str
    index: int
    name: str
    num_nodes: int
    num_configs: int
    file_bytes: int


_Job = tuple[int, str, str, int, tuple[int, int], bool, str, str, str]


def _write_one(job: _Job) -> FileInfo:
    seed, collection, split, index, size, test_labels, cost_model, space, folder = job
    source, search = collection.split(":")
    graph_id, arrays = generate_planned_file(
        seed, source, search, split, index, size, test_labels, cost_model, space
    )
    path = Path(folder) / f"{graph_id}.npz"
    write_npz(path, arrays)
    return FileInfo(
        collection,
        split,
        index,
        graph_id,
        int(arrays["node_opcode"].size),
        int(arrays["config_runtime"].size),
        path.stat().st_size,
    )


def write_release_dataset(
    out: Path,
    preset: str,
    seed: int = 0,
    collections: Sequence[str] = COLLECTIONS,
    workers: int | None = None,
    test_labels: bool = False,
    cost_model: str = "standard",
    log: Callable[[str], None] | None = None,
    nlp_configs: tuple[int, int] | None = None,
    search_space: str = "permutations",
) -> list[FileInfo]:
    """Writes out/<source>/<search>/<split>/<graph_id>.npz of a preset's collections atomically.

    One pool task per file (`workers` processes, default one per core); the files
    do not depend on `workers`. `nlp_configs` (low, high) sets the nlp train/valid
    configurations per graph (`nlp_targets`); `search_space` is "permutations" (each
    group free) or "decisions" (groups tied into a few binary decisions, as in the real
    files: `decisions.py`). Returns what was written, in plan order:
        write_release_dataset(Path("/tmp/rel"), "release_eighth", collections=["xla:default"])
    """
    cost_constants(cost_model)
    check_search_space(search_space)
    nlp = nlp_targets(nlp_configs)
    plans = {
        c: release_plan(preset, c, seed, nlp if c.startswith("nlp:") else None)
        for c in dict.fromkeys(collections)
    }
    if workers is not None and workers < 1:
        raise PipelineError(f"--workers must be at least 1, got {workers}")
    workers = workers or os.cpu_count() or 1
    out = Path(out)
    if out.exists() and not (out.is_dir() and looks_like_layout_set(out)):
        raise PipelineError(
            f"{out}: exists and is not a synthetic layout set; choose another --out or remove it"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    infos: list[FileInfo] = []
    with atomic_directory(out) as tmp:
        jobs: list[_Job] = []
        for collection, plan in plans.items():
            source, search = collection.split(":")
            for split in SPLITS:
                folder = tmp / source / search / split
                folder.mkdir(parents=True)
                for index, size in enumerate(plan[split]):
                    jobs.append(
                        (
                            seed,
                            collection,
                            split,
                            index,
                            size,
                            test_labels,
                            cost_model,
                            search_space,
                            str(folder),
                        )
                    )
        # Largest files first, so that the pool does not end on one long file.
        order = sorted(range(len(jobs)), key=lambda i: -jobs[i][4][0] * jobs[i][4][1])
        done: dict[int, FileInfo] = {}
        if workers == 1:
            results = ((i, _write_one(jobs[i])) for i in order)
        else:
            pool = multiprocessing.get_context("spawn").Pool(min(workers, len(jobs)))
            results = zip(order, pool.imap(_write_one, [jobs[i] for i in order]))
        try:
            for i, info in results:
                done[i] = info
                if log is not None:
                    log(
                        f"{info.collection} {info.split} {info.name}: {info.num_nodes} nodes, "
                        f"{info.num_configs} configs, {info.file_bytes / 2**20:.1f} MiB "
                        f"({len(done)}/{len(jobs)})"
                    )
        finally:
            if workers != 1:
                pool.terminate()
                pool.join()
        infos = [done[i] for i in range(len(jobs))]
    return infos
