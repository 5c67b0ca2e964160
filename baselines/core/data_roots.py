"""Which data root a script reads (`training_root`, `ranking_root`), and the toy-data banner."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from baselines.core.errors import PipelineError

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class DataPlace:
    """Where a collection's data lives: the `--data_root` default, the bundled `toy` set,
    what a root `holds` and the `unit` toy results say nothing about (for messages)."""

    default: str
    toy: Path
    holds: str
    unit: str

    def expand(self, text: str) -> Path:
        """`text` as a folder; a relative default is the repository's own (the toy set)."""
        path = Path(text).expanduser()
        if text == self.default and not path.is_absolute() and (REPO_ROOT / path).is_dir():
            return REPO_ROOT / path
        return path

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
    place: DataPlace, flag: str | None, run_root: str | None
) -> tuple[Path, str, str | None]:
    """(the root to rank or evaluate, where that choice came from, the banner or None): an
    explicit `--data_root` that exists, else the run's root, the default, the toy set."""
    if flag is not None:
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
