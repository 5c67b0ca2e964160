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
    """TensorFlow's thread-pool variables for tile training and prediction on `cores` cores.

    On 2 cores or fewer: one thread inside each op, two ops at a time. A tile
    train step is a few thousand small ops; splitting each across both cores
    costs more than it saves, while two independent ops side by side keep
    both busy. Layout training is not given it: its ops work on [nodes,
    configurations, width] states, and it made their epochs slower. Larger
    machines keep TensorFlow's own choice (empty): it was not measured there.
    """
    if cores is None:
        cores = available_cores()
    if cores > 2:
        return {}
    return dict(zip(THREAD_POOL_VARIABLES, ("1", "2")))


def prepare_tensorflow_import(thread_pools: Mapping[str, str] | None = None) -> None:
    """Quiets TensorFlow's C++ start-up log, sizes its thread pools, skips setuptools' shim.

    A `thread_pools` variable the environment already sets is left as it is.

    TF 2.15 runs `import distutils` when it is imported. In a virtual
    environment with setuptools, the shim setuptools installs at interpreter
    start (`distutils-precedence.pth`) turns that into importing most of
    setuptools and pkg_resources, a noticeable part of every short command.
    Python 3.11 still ships its own distutils, which is all TF needs, so the
    shim is removed there.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # CUDA-plugin noise on CPU machines
    for name, value in (thread_pools or {}).items():
        os.environ.setdefault(name, value)
    if sys.version_info >= (3, 12) or "distutils" in sys.modules:
        return
    sys.meta_path[:] = [
        finder for finder in sys.meta_path if type(finder).__module__ != "_distutils_hack"
    ]
