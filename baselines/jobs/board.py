"""The job's board: which lanes still work, and which lane ranks a collection.

Beam runs a stage's elements to their end before the next stage starts, so a
ranking stage of its own would wait for every training of every collection.
Instead the lane that sees a collection's last training end ranks it at once,
and a training that starts after other lanes have ended takes their cores. The
lanes are separate processes (or machines), so they meet in files under
`<out>/.board/<run id>/`, on the storage the job's `--out` already has to share.
"""

from __future__ import annotations

import os
from pathlib import Path


class Board:
    """One run of the job's shared state: lanes that ended, and claimed rankings.

    `cores` is what the lanes share (None: the runner places the work, and a
    training's threads are left to TensorFlow).
    """

    def __init__(self, out: Path, run_id: str, lanes: int, cores: int | None):
        self.folder = Path(out) / ".board" / run_id
        self.lanes = lanes
        self.cores = cores

    def lane_ended(self, lane: int) -> None:
        """Marks a lane as ended: its cores are free for the trainings still to start."""
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"lane_{lane}.ended").touch()

    def threads(self) -> int | None:
        """TensorFlow threads for a training starting now: the cores over the lanes still
        working (a training cannot change its threads once started)."""
        if self.cores is None:
            return None
        ended = len(list(self.folder.glob("lane_*.ended"))) if self.folder.is_dir() else 0
        return max(1, self.cores // max(1, self.lanes - ended))

    def claim(self, name: str) -> bool:
        """True for exactly one caller per name and run: the file is created exclusively."""
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(self.folder / f"{name}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True
