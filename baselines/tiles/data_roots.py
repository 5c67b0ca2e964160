"""Which data root a run reads, and the banner that says it is the toy set.

Training takes `--data_root` as given (`resolve_data_root`); prediction and
evaluation may also take the root a run was trained on (`choose_data_root`).
Only the bundled toy set stands in for a missing root, and then always with
`toy_data_banner` first and last. No TensorFlow and no numpy here: the
prediction script picks the root and starts reading before TensorFlow loads.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from baselines.core.errors import PipelineError
from baselines.tiles.tile_args import DEFAULT_DATA_ROOT

BUNDLED_TOY_ROOT = Path(__file__).resolve().parents[2] / "data" / "tile_xla_toy"


def toy_data_banner(reason: str) -> str:
    """The line that says a run uses the bundled toy set (printed first and last)."""
    return (
        f"!!! TOY DATA: {reason}, so this uses the bundled synthetic toy set "
        f"{BUNDLED_TOY_ROOT}; its results say nothing about real TPU kernels !!!"
    )


def resolve_data_root(
    data_root: Path | str, default: Path | str | None, log: Callable[[str], None] = print
) -> tuple[Path, bool]:
    """The data root to train on and whether it is the bundled toy set standing in for it.

    The toy set stands in only when the flag kept its default and nothing is
    there yet; any other missing folder is a mistyped flag, refused: training
    on toy data by accident is worse than stopping.
    """
    root = Path(data_root).expanduser()
    if root.is_dir():
        return root, False
    if default is not None and root == Path(default).expanduser():
        log(toy_data_banner(f"no --data_root given and the default {root} does not exist"))
        return BUNDLED_TOY_ROOT, True
    raise PipelineError(
        f"--data_root: {root} does not exist; pass the folder holding train/ valid/ test/ "
        "(python echo_download_commands.py downloads them), or leave the flag out to try "
        "the bundled toy set"
    )


def choose_data_root(flag: str | None, run_root: str | None) -> tuple[Path, str]:
    """The data root to predict on and where that choice came from.

    An explicit `--data_root` must exist; without it, the root the run was
    trained on, then the default download location, then the bundled toy set.
    """
    if flag is not None:
        root = Path(flag).expanduser()
        if not root.is_dir():
            raise PipelineError(
                f"--data_root: {root} does not exist; pass the folder holding the split's "
                "folder (e.g. ~/data/tpugraphs/npz/tile/xla)"
            )
        return root, "--data_root"
    for candidate, origin in ((run_root, "the run file"), (DEFAULT_DATA_ROOT, "the default")):
        if candidate and Path(candidate).expanduser().is_dir():
            return Path(candidate).expanduser(), origin
    return BUNDLED_TOY_ROOT, "the bundled toy set (no other data root exists)"


def toy_notice(root: Path, origin: str) -> str | None:
    """The toy-data banner when the bundled toy set is read without --data_root naming it."""
    if origin == "--data_root" or Path(root).resolve() != BUNDLED_TOY_ROOT.resolve():
        return None
    why = "the run was trained on it" if origin == "the run file" else "no data root exists"
    return toy_data_banner(f"no --data_root given and {why}")
