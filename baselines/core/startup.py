"""Process set-up that entry scripts run before TensorFlow is imported."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

# The environment variables TensorFlow sizes its intra- and inter-op pools from.
THREAD_POOL_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def tile_thread_pools(cores: int | None = None) -> dict[str, str]:
    """TensorFlow's thread-pool variables for tile work on `cores` cores: on 2 or fewer, one
    thread per op and two ops at a time (a tile step is thousands of small ops), else none."""
    if cores is None:
        cores = available_cores()
    if cores > 2:
        return {}
    return dict(zip(THREAD_POOL_VARIABLES, ("1", "2")))


def prepare_tensorflow_import(thread_pools: Mapping[str, str] | None = None) -> None:
    """Quiets TensorFlow's C++ log, sets unset `thread_pools` variables, drops distutils' shim."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # CUDA-plugin noise on CPU machines
    for name, value in (thread_pools or {}).items():
        os.environ.setdefault(name, value)
    if sys.version_info >= (3, 12) or "distutils" in sys.modules:
        return
    sys.meta_path[:] = [
        finder for finder in sys.meta_path if type(finder).__module__ != "_distutils_hack"
    ]
