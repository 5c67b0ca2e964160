"""Reads a dataset npz file's arrays safely (thread-safe): every member's header and sizes are
checked before anything is allocated; damaged bytes end in one line naming the file."""

from __future__ import annotations

import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import numpy as np

from baselines.core.errors import PipelineError

# Deflate cannot shrink data more than about 1032:1: a member claiming more is refused.
MAX_DEFLATE_RATIO = 1032
# numpy's .npy header parsing is not thread-safe in CPython 3.11 (python/cpython#106905).
_NPY_HEADER_LOCK = threading.Lock()

# A member's reader: (stream at its data, shape, Fortran order, dtype) -> array.
MemberReader = Callable[[IO[bytes], tuple[int, ...], bool, np.dtype], np.ndarray]


def open_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, file_size: int
) -> tuple[IO[bytes], tuple[int, ...], bool, np.dtype]:
    """An open .npy member at its data, with its declared shape, Fortran order and dtype."""
    if info.compress_size > file_size or info.file_size > max(
        info.compress_size * MAX_DEFLATE_RATIO, info.compress_size + 1024
    ):
        raise ValueError(
            f"member {info.filename} claims {info.file_size} bytes from "
            f"{info.compress_size} compressed in a {file_size}-byte file"
        )
    stream = archive.open(info)
    version = np.lib.format.read_magic(stream)
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f"member {info.filename} has .npy format version {version}")
    with _NPY_HEADER_LOCK:
        shape, fortran, dtype = np.lib.format._read_array_header(stream, version)
    if dtype.hasobject:
        raise ValueError(f"member {info.filename} holds Python objects, not numbers")
    data_bytes = info.file_size - stream.tell()
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != data_bytes:
        raise ValueError(
            f"member {info.filename}: header declares shape {shape} of {dtype} but the "
            f"member holds {data_bytes} bytes"
        )
    return stream, tuple(shape), bool(fortran), dtype


def read_whole(
    stream: IO[bytes], shape: tuple[int, ...], fortran: bool, dtype: np.dtype
) -> np.ndarray:
    """The member's array (C order), read from `stream` at its data."""
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    data = stream.read(nbytes)
    if len(data) != nbytes:
        raise ValueError(f"member ends after {len(data)} of {nbytes} bytes")
    array = np.frombuffer(data, dtype=dtype, count=count)
    return np.ascontiguousarray(array.reshape(shape, order="F" if fortran else "C"))


def unreadable(path: Path, error: BaseException, advice: str) -> PipelineError:
    """The one line for a file that zipfile, zlib or numpy could not read."""
    if isinstance(error, MemoryError):
        return PipelineError(f"{path}: not a readable npz file (too large to read); {advice}")
    reason = " ".join(str(error).split()) or type(error).__name__
    return PipelineError(
        f"{path}: not a readable npz file ({type(error).__name__}: {reason}); {advice}"
    )


def read_npz(
    path: Path,
    keys: Sequence[str],
    advice: str,
    readers: dict[str, MemberReader] | None = None,
    shapes_only: bool = False,
) -> dict[str, np.ndarray | tuple[int, ...]]:
    """The named arrays of `path` (with `shapes_only`, their declared shapes); a missing key or
    damaged bytes raise one PipelineError naming the file and ending in `advice`."""
    try:
        size = path.stat().st_size
        with zipfile.ZipFile(path) as archive:
            infos = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
            missing = [k for k in keys if k not in infos]
            if missing:
                raise PipelineError(f"{path}: missing key(s) {', '.join(missing)}; {advice}")
            arrays: dict[str, np.ndarray | tuple[int, ...]] = {}
            for key in keys:
                stream, shape, fortran, dtype = open_member(archive, infos[key], size)
                with stream:
                    if shapes_only:
                        arrays[key] = shape
                    else:
                        read = (readers or {}).get(key, read_whole)
                        arrays[key] = read(stream, shape, fortran, dtype)
            return arrays
    except PipelineError:
        raise
    # zipfile, zlib and numpy's header parser raise many types on damaged bytes.
    except Exception as e:
        raise unreadable(path, e, advice) from None
