"""Process set-up that entry scripts run before TensorFlow is imported.

from baselines.core.startup import prepare_tensorflow_import
prepare_tensorflow_import()
import tensorflow as tf
"""

from __future__ import annotations

import os
import sys


def prepare_tensorflow_import() -> None:
    """Quiets TensorFlow's C++ start-up log and skips setuptools' distutils shim.

    TF 2.15 runs `import distutils` when it is imported. In a virtual environment
    with setuptools, the shim that setuptools installs at interpreter start
    (`distutils-precedence.pth`) turns that into importing most of setuptools
    and pkg_resources, a noticeable part of every short command. Python 3.11
    still ships its own distutils, which TF only
    needs for the import to succeed, so the shim is removed there. On Python
    3.12+ (no standard distutils) or once distutils is imported, nothing changes.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # CUDA-plugin noise on CPU machines
    if sys.version_info >= (3, 12) or "distutils" in sys.modules:
        return
    sys.meta_path[:] = [
        finder for finder in sys.meta_path if type(finder).__module__ != "_distutils_hack"
    ]
