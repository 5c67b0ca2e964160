"""Which data root a script reads (`training_root`, `ranking_root`), the toy-data banner, and
what a run's data was (`data_identity`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from baselines.core.array_cache import files_fingerprint
from baselines.core.errors import PipelineError
from baselines.core.io_utils import list_npz_files

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class DataPlace:
    """Where a collection's data lives: the `--data_root` default, the bundled `toy` set,
    what a root `holds` and the `unit` toy results say nothing about (for messages)."""

    default: str
    toy: Path
    holds: str
    unit: str

    @property
    def toy_text(self) -> str:
        """The toy set as `--bundled_toy` writes `--data_root`: relative to the repository
        (the same run hash in every clone of it)."""
        toy = self.toy.resolve()
        return toy.relative_to(REPO_ROOT).as_posix() if toy.is_relative_to(REPO_ROOT) else str(toy)

    def expand(self, text: str) -> Path:
        """`text` as a folder; the relative default and `toy_text` are the repository's own."""
        path = Path(text).expanduser()
        own = text in (self.default, self.toy_text) and not path.is_absolute()
        return REPO_ROOT / path if own and (REPO_ROOT / path).is_dir() else path

    def is_toy(self, root: Path) -> bool:
        return Path(root).resolve() == self.toy.resolve()


def toy_banner(place: DataPlace, reason: str) -> str:
    """The line that says a script reads the bundled toy set (printed first and last)."""
    return (
        f"!!! TOY DATA: {reason}, so this uses the bundled synthetic toy set {place.toy}; "
        f"its results say nothing about real TPU {place.unit} !!!"
    )


def training_root(
    place: DataPlace, flag: str, log: Callable[[str], None] = print
) -> tuple[Path, bool, bool]:
    """(the root to train on, whether it is the toy set, whether it stands in for a missing
    default), the banner said through `log`; any other missing folder is refused."""
    root = place.expand(flag)
    if root.is_dir():
        if place.is_toy(root):
            log(toy_banner(place, "--data_root is the bundled toy set"))
        return root, place.is_toy(root), False
    if flag == place.default:
        log(toy_banner(place, f"no --data_root given and the default {root} does not exist"))
        return place.toy, True, True
    raise PipelineError(
        f"--data_root: {root} does not exist; pass the folder holding {place.holds} "
        "(python echo_download_commands.py downloads them), or leave the flag out to try "
        "the bundled toy set"
    )


def ranking_root(
    place: DataPlace, flag: str | None, run_root: str | None, bundled_toy: bool = False
) -> tuple[Path, str, str | None]:
    """(the root to rank or evaluate, where that choice came from, the banner or None): the
    toy set with `bundled_toy`, an explicit `--data_root` that exists, else the run's root,
    the default, the toy set."""
    if bundled_toy:
        root, origin = place.toy, "--bundled_toy"
    elif flag is not None:
        root = Path(flag).expanduser()
        if not root.is_dir():
            raise PipelineError(
                f"--data_root: {root} does not exist; pass the folder holding {place.holds}"
            )
        origin = "--data_root"
    else:
        candidates = ((run_root, "the run file"), (place.default, "the default"))
        found = [(place.expand(c), o) for c, o in candidates if c and place.expand(c).is_dir()]
        root, origin = found[0] if found else (place.toy, "no other data root exists")
    banner = toy_banner(place, f"the data root comes from {origin}") if place.is_toy(root) else None
    return root, origin, banner


def data_identity(
    folder: Path,
    splits: Sequence[str],
    max_files: int | None,
    salt: str,
    toy_fallback: bool = False,
) -> dict:
    """What a run read: the folder holding its splits, each split's files fingerprint (the
    first `max_files` files; path, size, mtime and zip directory, with `salt`), and
    `identity`, 16 hex digits of their hash. A run of the same flags on other data is named
    with it (`conductor.choose_run_hash`)."""
    fingerprints = {
        s: files_fingerprint(
            list_npz_files(folder / s, max_files, missing="does not exist", empty="no .npz files"),
            salt,
        )
        for s in splits
    }
    resolved = str(Path(folder).expanduser().resolve())
    digest = hashlib.sha256(json.dumps([resolved, fingerprints], sort_keys=True).encode())
    return {
        "root": str(folder),
        "toy_fallback": toy_fallback,
        "fingerprints": fingerprints,
        "identity": digest.hexdigest()[:16],
    }
