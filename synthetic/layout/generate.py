"""Layout configurations, runtimes and files: one synthetic layout file per program.

    graph_id, arrays = generate_file(seed=0, source="xla", search="random", split="train", index=3)
    write_layout_dataset(Path("data/layout_toy"), {"train": 8, "valid": 3, "test": 3}, seed=0)
    write_layout_dataset(Path("/tmp/alt"), {"train": 8}, seed=1, cost_model="alternate")

A file is a pure function of (seed, source, search, split, index): its program depends
on (seed, source, split, index) only, so the default and random collections of a
source hold the same programs (as the real xla test files do), with their own
configurations. Files are written with fixed zip metadata: same seed, same bytes.

Configurations (node_config_feat, per configurable node: output, input, kernel
groups of 6; kernel only for convolutions and dots, whose second operand it lays
out, as in the real files):
- `random` search: every group a uniformly random permutation of its tensor's rank,
  or all -1 (the default) with probability 0.05 (0.3 for reshapes); 5% of the rows
  repeat an earlier row (re-measured with their own noise), as real random files do.
- `default` search: row 0 is the compiler's layouts written out (node_feat's
  layouts; reshapes leave half their groups at -1); every other row changes
  1 + Poisson(0.15 * groups) groups of it by swapping two adjacent dims (the two
  most-minor ones 60% of the time); 10% of the rows repeat an earlier row.
Train and valid files get 100-300 configurations, test files 200, with runtimes of
0 unless `test_labels` (the real test split hides them). `cost_model` names the
constants of `cost_model.COST_MODELS` ("standard", the toy set's, or "alternate"):
the files of both hold the same programs and configurations, only the runtimes differ.
Release-size files (thousands of nodes and configurations) come from `release.py`.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_directory
from synthetic.layout.cost_model import (
    GROUP_IN,
    GROUP_KERNEL,
    GROUP_OUT,
    GROUP_WIDTH,
    NOISE_SIGMA,
    OP_RESHAPE,
    cost_constants,
    group_tensor,
    layout_runtime_ns,
    measure,
    node_layouts,
    operands,
)
from synthetic.layout.programs import FAMILIES, Program, build_program

SOURCES = ("xla", "nlp")
SEARCHES = ("default", "random")
SPLITS = ("train", "valid", "test")
DEFAULT_COUNTS = {"train": 8, "valid": 3, "test": 3}
MIN_CONFIGS, MAX_CONFIGS, TEST_CONFIGS = 100, 300, 200
DUPLICATE_FRACTION = {"default": 0.10, "random": 0.05}
# Keys in the order of the real files, with their dtypes (edge_index is stored in
# Fortran order there, and here).
ARRAY_DTYPES: Mapping[str, np.dtype] = {
    "node_feat": np.dtype("<f4"),
    "node_opcode": np.dtype("u1"),
    "edge_index": np.dtype("<i8"),
    "node_config_feat": np.dtype("<f4"),
    "node_config_ids": np.dtype("<i8"),
    "config_runtime": np.dtype("<i8"),
    "node_splits": np.dtype("<i8"),
}
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def family_of(graph_id: str) -> str:
    """The program family a graph id names (`<family>_<dtype>_<index>`)."""
    return graph_id.split("_")[0]


def _rng(seed: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng([seed, *keys])


def make_program(seed: int, source: str, split: str, index: int) -> tuple[str, Program]:
    """The graph id and program of one file (shared by both searches of a source)."""
    families = FAMILIES[source][split]
    family = families[index % len(families)]
    rng = _rng(seed, SOURCES.index(source), SPLITS.index(split), index)
    program = build_program(rng, source, family)
    return f"{family}_{program.etype.name}_{index:03d}", program


def _groups(program: Program) -> list[tuple[int, int, tuple[int, ...], bool]]:
    """(configurable slot, group, node_feat layout of its tensor, is a reshape) per group."""
    layouts = node_layouts(program.node_feat)
    ops = operands(program.edge_index, program.num_nodes)
    out = []
    for j, w in enumerate(program.node_config_ids.tolist()):
        opcode = int(program.node_opcode[w])
        for group in (GROUP_OUT, GROUP_IN, GROUP_KERNEL):
            t = w if group == GROUP_OUT else group_tensor(opcode, ops[w], group)
            if t is not None and layouts[t]:
                out.append((j, group, layouts[t], opcode == OP_RESHAPE))
    return out


def random_configs(rng: np.random.Generator, program: Program, c: int) -> np.ndarray:
    feat = np.full((c, program.node_config_ids.size, 3 * GROUP_WIDTH), -1, dtype=np.float32)
    for j, group, layout, is_reshape in _groups(program):
        r = len(layout)
        perms = np.argsort(rng.random((c, r)), axis=1)
        keep = rng.random(c) >= (0.3 if is_reshape else 0.05)
        cols = slice(group * GROUP_WIDTH, group * GROUP_WIDTH + r)
        feat[keep, j, cols] = perms[keep]
    return feat


def default_configs(rng: np.random.Generator, program: Program, c: int) -> np.ndarray:
    nc = program.node_config_ids.size
    groups = _groups(program)
    base = np.full((nc, 3 * GROUP_WIDTH), -1, dtype=np.float32)
    explicit = {j: not is_reshape or rng.random() < 0.5 for j, _, _, is_reshape in groups}
    for j, group, layout, _ in groups:
        if explicit[j]:
            base[j, group * GROUP_WIDTH : group * GROUP_WIDTH + len(layout)] = layout
    feat = np.repeat(base[None], c, axis=0)
    movable = [g for g in groups if len(g[2]) >= 2]
    for i in range(1, c if movable else 0):
        m = min(len(movable), 1 + int(rng.poisson(0.15 * len(movable))))
        for pick in rng.choice(len(movable), size=m, replace=False):
            j, group, layout, _ = movable[int(pick)]
            new = list(layout)
            p = 0 if rng.random() < 0.6 else int(rng.integers(len(new) - 1))
            new[p], new[p + 1] = new[p + 1], new[p]
            feat[i, j, group * GROUP_WIDTH : group * GROUP_WIDTH + len(new)] = new
    return feat


def _add_duplicates(rng: np.random.Generator, feat: np.ndarray, fraction: float) -> None:
    """Overwrites about `fraction` of the rows (never row 0) with copies of earlier rows."""
    c = feat.shape[0]
    count = min(c - 1, int(round(fraction * c)))
    for i in np.sort(rng.choice(np.arange(1, c), size=count, replace=False)) if count else ():
        feat[i] = feat[int(rng.integers(i))]


def generate_file(
    seed: int,
    source: str,
    search: str,
    split: str,
    index: int,
    test_labels: bool = False,
    cost_model: str = "standard",
) -> tuple[str, dict[str, np.ndarray]]:
    """The graph id and the arrays (real keys, order and dtypes) of one layout file.

    generate_file(0, "xla", "random", "train", 3, cost_model="alternate")[1]["config_runtime"]
    """
    cost_constants(cost_model)  # an unknown name fails before any work
    graph_id, program = make_program(seed, source, split, index)
    rng = _rng(seed, SOURCES.index(source), SPLITS.index(split), index, 1 + SEARCHES.index(search))
    c = TEST_CONFIGS if split == "test" else int(rng.integers(MIN_CONFIGS, MAX_CONFIGS + 1))
    make = random_configs if search == "random" else default_configs
    feat = make(rng, program, c)
    _add_duplicates(rng, feat, DUPLICATE_FRACTION[search])
    return graph_id, program_arrays(program, feat, rng, split, test_labels, cost_model)


def program_arrays(
    program: Program,
    feat: np.ndarray,
    rng: np.random.Generator,
    split: str,
    test_labels: bool,
    cost_model: str,
    noise_sigma: float = NOISE_SIGMA,
) -> dict[str, np.ndarray]:
    """A file's arrays (real keys, order, dtypes) from a program and its configurations.

    Runtimes are the cost model's, measured with relative noise `noise_sigma` from
    `rng`; 0 in test files unless `test_labels`:
    program_arrays(p, feat, rng, "train", False, "standard")
    """
    runtime = measure(
        layout_runtime_ns(
            program.node_feat,
            program.node_opcode,
            program.edge_index,
            program.node_config_ids,
            feat,
            cost_model,
        ),
        rng,
        noise_sigma,
    )
    if split == "test" and not test_labels:
        runtime = np.zeros_like(runtime)
    arrays = {
        "node_feat": program.node_feat,
        "node_opcode": program.node_opcode,
        "edge_index": np.asfortranarray(program.edge_index),
        "node_config_feat": feat,
        "node_config_ids": program.node_config_ids,
        "config_runtime": runtime,
        "node_splits": program.node_splits,
    }
    return {k: np.asanyarray(arrays[k]).astype(d, copy=False) for k, d in ARRAY_DTYPES.items()}


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """A compressed npz (zlib level 6, as numpy.savez_compressed) with fixed zip metadata.

    Keeps each array's memory order (edge_index in Fortran order, as the real files).
    """
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, value in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, value, version=(1, 0), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue(), compresslevel=6)


def looks_like_layout_set(path: Path) -> bool:
    """True for an empty folder or one holding only <source>/<search>/<split>/*.npz."""
    for source in path.iterdir():
        if not source.is_dir() or source.is_symlink() or source.name not in SOURCES:
            return False
        for search in source.iterdir():
            if not search.is_dir() or search.name not in SEARCHES:
                return False
            for split in search.iterdir():
                if not split.is_dir() or split.name not in SPLITS:
                    return False
                if any(not (f.is_file() and f.suffix == ".npz") for f in split.iterdir()):
                    return False
    return True


def write_layout_dataset(
    out: Path,
    counts: Mapping[str, int],
    seed: int,
    test_labels: bool = False,
    log: Callable[[str], None] | None = None,
    cost_model: str = "standard",
) -> dict[str, list[Path]]:
    """Writes out/{xla,nlp}/{default,random}/{train,valid,test}/<graph_id>.npz atomically.

    Built in a temporary folder next to `out` and renamed into place; an existing
    `out` is replaced only when it holds nothing but such a set. Returns the
    written files per collection ("xla:default", ...), as their final paths.
    `cost_model` ("standard" or "alternate") picks the runtimes' constants.
    """
    cost_constants(cost_model)
    out = Path(out)
    if out.exists() and not (out.is_dir() and looks_like_layout_set(out)):
        raise PipelineError(
            f"{out}: exists and is not a synthetic layout set; choose another --out or remove it"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[Path]] = {}
    with atomic_directory(out) as tmp:
        for source in SOURCES:
            for search in SEARCHES:
                files = written.setdefault(f"{source}:{search}", [])
                for split in SPLITS:
                    folder = tmp / source / search / split
                    folder.mkdir(parents=True)
                    for index in range(counts.get(split, 0)):
                        graph_id, arrays = generate_file(
                            seed, source, search, split, index, test_labels, cost_model
                        )
                        write_npz(folder / f"{graph_id}.npz", arrays)
                        files.append(out / source / search / split / f"{graph_id}.npz")
                if log is not None:
                    log(f"{source}:{search}: {len(files)} files")
    return written
