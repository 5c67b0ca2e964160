"""Verified, content-keyed cache folders of memory-mapped .npy arrays (tile and layout caches)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import mmap
import os
import shutil
import struct
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_write_text, publish_once, temp_prefix

# Says every array matched its checksum, keyed by each file's inode, size, mtime and ctime.
VERIFIED_STAMP = "verified.json"
# Files younger than this are verified but not stamped (coarse timestamps).
STAMP_SETTLE_S = 2.0

# An npz's last bytes hold the zip directory (every member's CRC-32), hashed into the key.
FINGERPRINT_TAIL_BYTES = 4096

# Bytes reserved for a chunked array's .npy header (written last), 64-byte aligned.
_CHUNKED_HEADER_BYTES = 128

# Bytes of a memory-mapped array that `array_digest` holds resident at a time.
DIGEST_BLOCK_BYTES = 1 << 24


def files_fingerprint(files: Sequence[Path], salt: str) -> str:
    """24 hex digits hashing every file's path, size, mtime and zip directory, and `salt`."""
    h = hashlib.sha256(salt.encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        with open(f, "rb") as stream:
            stream.seek(0, os.SEEK_END)
            stream.seek(max(0, stream.tell() - FINGERPRINT_TAIL_BYTES))
            h.update(hashlib.sha256(stream.read()).digest())
    return h.hexdigest()[:24]


def _mapping_under(array: np.ndarray) -> mmap.mmap | None:
    """The memory map under `array` (reached through `.base` for views), or None."""
    while isinstance(array, np.ndarray):
        mapping = getattr(array, "_mmap", None)
        if mapping is not None:
            return mapping
        array = array.base
    return array if isinstance(array, mmap.mmap) else None


def release_mapped_pages(view: np.ndarray) -> None:
    """Drops this process's resident pages under `view`, a C-contiguous slice of a memory map."""
    mapping = _mapping_under(view)
    if mapping is None or view.nbytes == 0 or not view.flags.c_contiguous:
        return
    if not hasattr(mmap, "MADV_DONTNEED"):  # Windows: no madvise; pages stay resident
        return
    base = np.frombuffer(mapping, dtype=np.uint8)  # where the mapping starts
    start = view.ctypes.data - base.ctypes.data
    del base  # a live export would keep the mapping from being closed
    first = start - start % mmap.PAGESIZE  # madvise takes page-aligned starts
    length = min(start + view.nbytes, len(mapping)) - first
    if 0 <= first and length > 0:
        mapping.madvise(mmap.MADV_DONTNEED, first, length)


def array_digest(array: np.ndarray) -> str:
    """BLAKE2b of an array's bytes in C order, 32 hex digits; a memory map block by block."""
    if _mapping_under(array) is None or not array.flags.c_contiguous:
        return hashlib.blake2b(np.ascontiguousarray(array).data, digest_size=16).hexdigest()
    flat = array.reshape(-1)  # a view: still over the memory map
    step = max(1, DIGEST_BLOCK_BYTES // max(array.itemsize, 1))
    hasher = hashlib.blake2b(digest_size=16)
    for start in range(0, flat.size, step):
        block = flat[start : start + step]
        hasher.update(block.data)
        release_mapped_pages(block)
    return hasher.hexdigest()


def discard_directory(path: Path) -> None:
    """Removes a folder by renaming it aside first, so no reader sees it half deleted."""
    aside = path.with_name(f"{temp_prefix(path.name)}discard")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return  # another process removed it first
    except OSError:
        aside = path
    shutil.rmtree(aside, ignore_errors=True)


def _array_record(shape: tuple[int, ...], dtype: np.dtype, digest: str) -> dict[str, Any]:
    return {"shape": list(shape), "dtype": dtype.str, "blake2b": digest}


def save_array_folder(
    path: Path, arrays: Mapping[str, np.ndarray], *, name: str, version: int
) -> None:
    """Writes arrays as .npy files and meta.json, atomically (first writer wins)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records = {}
    with publish_once(path) as tmp:
        for field, value in arrays.items():
            np.save(tmp / f"{field}.npy", value, allow_pickle=False)
            records[field] = _array_record(value.shape, value.dtype, array_digest(value))
        meta = {"name": name, "format": version, "arrays": records}
        (tmp / "meta.json").write_text(json.dumps(meta))


def _npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """A version 1.0 .npy header of exactly `_CHUNKED_HEADER_BYTES` bytes."""
    described = {
        "descr": np.lib.format.dtype_to_descr(dtype),
        "fortran_order": False,
        "shape": tuple(int(d) for d in shape),
    }
    text = repr(described).encode("latin1")
    pad = _CHUNKED_HEADER_BYTES - 10 - len(text) - 1
    if pad < 0:
        raise ValueError(f"a .npy header for shape {shape} does not fit the reserved bytes")
    length = struct.pack("<H", _CHUNKED_HEADER_BYTES - 10)
    return b"\x93NUMPY\x01\x00" + length + text + b" " * pad + b"\n"


@dataclasses.dataclass
class _ChunkedArray:
    file: BinaryIO
    trailing: tuple[int, ...]
    dtype: np.dtype | None
    hasher: Any
    rows: int = 0


class ArrayFolderWriter:
    """Appends chunks of rows to the arrays of a folder being written (`write_array_folder`)."""

    def __init__(
        self, folder: Path, layout: Mapping[str, tuple[tuple[int, ...], str | None]]
    ) -> None:
        self.folder = folder
        self._arrays: dict[str, _ChunkedArray] = {}
        for field, (trailing, dtype) in layout.items():
            f = open(folder / f"{field}.npy", "w+b")
            f.write(b"\0" * _CHUNKED_HEADER_BYTES)
            self._arrays[field] = _ChunkedArray(
                file=f,
                trailing=tuple(trailing),
                dtype=None if dtype is None else np.dtype(dtype),
                hasher=hashlib.blake2b(digest_size=16),
            )

    def append(self, field: str, chunk: np.ndarray) -> None:
        """Writes `chunk`'s rows after the array's earlier rows (shape (rows, *row shape))."""
        target = self._arrays[field]
        chunk = np.asarray(chunk)
        if target.dtype is None:
            target.dtype = chunk.dtype
        if chunk.dtype.hasobject or tuple(chunk.shape[1:]) != target.trailing:
            raise ValueError(
                f"{field}: chunk of {chunk.dtype} {chunk.shape} does not fit rows of "
                f"{target.trailing}"
            )
        data = np.ascontiguousarray(chunk, dtype=target.dtype)
        buffer = memoryview(data.reshape(-1).view(np.uint8))
        target.file.write(buffer)
        target.hasher.update(buffer)
        target.rows += int(chunk.shape[0])

    def finish(self, name: str, version: int) -> None:
        """Writes every array's header and meta.json; the folder is then complete."""
        records = {}
        for field, target in self._arrays.items():
            dtype = target.dtype if target.dtype is not None else np.dtype("float64")
            shape = (target.rows, *target.trailing)
            target.file.seek(0)
            target.file.write(_npy_header(shape, dtype))
            target.file.close()
            records[field] = _array_record(shape, dtype, target.hasher.hexdigest())
        meta = {"name": name, "format": version, "arrays": records}
        (self.folder / "meta.json").write_text(json.dumps(meta))

    def close(self) -> None:
        for target in self._arrays.values():
            target.file.close()


@contextlib.contextmanager
def write_array_folder(
    path: Path, layout: Mapping[str, tuple[tuple[int, ...], str | None]], *, name: str, version: int
) -> Iterator[ArrayFolderWriter]:
    """A writer of a cache folder in chunks (`layout`: row shapes, dtypes), published at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with publish_once(path) as tmp:
        writer = ArrayFolderWriter(tmp, layout)
        try:
            yield writer
            writer.finish(name, version)
        finally:
            writer.close()


def _stamp_key(path: Path, fields: Sequence[str]) -> dict[str, list[int]]:
    key = {}
    for f in ["meta.json", *(f"{field}.npy" for field in fields)]:
        st = (path / f).stat()
        key[f] = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    return key


def _stamp_matches(path: Path, fields: Sequence[str]) -> bool:
    try:
        stamp = json.loads((path / VERIFIED_STAMP).read_text())
        return stamp == _stamp_key(path, fields)
    except (OSError, ValueError):
        return False


def _write_stamp(path: Path, fields: Sequence[str]) -> None:
    key = _stamp_key(path, fields)
    newest = max(v[3] for v in key.values()) / 1e9
    if time.time() - newest < STAMP_SETTLE_S:
        return
    try:
        atomic_write_text(path / VERIFIED_STAMP, json.dumps(key))
    except (PipelineError, OSError):
        pass  # a read-only cache is verified on every load instead


def _meta_problem(arrays: dict[str, np.ndarray], meta: dict, fields: Sequence[str]) -> str | None:
    for field in fields:
        recorded = meta["arrays"].get(field)
        value = arrays[field]
        if not isinstance(recorded, dict):
            return f"meta.json has no entry for {field}"
        if list(value.shape) != recorded.get("shape") or value.dtype.str != recorded.get("dtype"):
            return (
                f"{field}.npy holds {value.dtype.str} {tuple(value.shape)}, meta.json records "
                f"{recorded.get('dtype')} {recorded.get('shape')}"
            )
    return None


@dataclasses.dataclass(frozen=True)
class CachedArrays:
    """A checked cache folder: its meta.json and its arrays (memory-mapped, read-only)."""

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]


def check_array_folder(
    path: Path,
    fields: Sequence[str],
    *,
    version: int,
    structure_problem: Callable[[dict[str, np.ndarray]], str | None] | None = None,
    verify: bool = True,
) -> tuple[CachedArrays | None, str | None]:
    """A cache folder's arrays and None, or None and what is wrong (None, None: absent)."""
    if not path.exists():
        return None, None
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError) as e:
        return None, f"meta.json unreadable ({type(e).__name__})"
    if (
        not isinstance(meta, dict)
        or meta.get("format") != version
        or not isinstance(meta.get("name"), str)
        or not isinstance(meta.get("arrays"), dict)
    ):
        return None, "meta.json lacks the format, name or array records"
    arrays = {}
    for field in fields:
        try:
            arrays[field] = np.load(path / f"{field}.npy", mmap_mode="r", allow_pickle=False)
        except Exception as e:  # any damage in a file of ours means: rebuild it
            reason = " ".join(str(e).split())[:120] or type(e).__name__
            return None, f"{field}.npy unreadable ({type(e).__name__}: {reason})"
    problem = _meta_problem(arrays, meta, fields)
    if problem is None and structure_problem is not None:
        problem = structure_problem(arrays)
    if problem:
        return None, problem
    if verify and not _stamp_matches(path, fields):
        for field in fields:
            if array_digest(arrays[field]) != meta["arrays"][field].get("blake2b"):
                return None, f"{field}.npy does not match its checksum"
        _write_stamp(path, fields)
    return CachedArrays(meta=meta, arrays=arrays), None


def offsets_problem(
    arrays: Mapping[str, np.ndarray], offsets: str, owners: Sequence[str], items: int, what: str
) -> str | None:
    """What is wrong with `arrays[offsets]` as the cut of `owners`' rows into `items` parts:
    it needs `items + 1` entries from 0, never decreasing, ending at every owner's rows."""
    cut = np.asarray(arrays[offsets])
    if cut.shape != (items + 1,):
        return f"{offsets}.npy has {cut.shape[0]} entries for {items} {what}"
    rows = {arrays[o].shape[0] for o in owners}
    if cut[0] != 0 or np.any(np.diff(cut) < 0) or rows != {int(cut[-1])}:
        return f"{offsets}.npy does not cut the rows of {', '.join(owners)} ({sorted(rows)})"
    return None
