"""Atomic file output: a result file is either complete or absent.

Writers put their bytes into a temporary file in the destination's own directory
(so the final rename never crosses a filesystem) and `os.replace` it onto the
destination only once everything was written. On any error the temporary file is
removed and an existing destination is left untouched. Temporary names look like
`<name>.tmp-<random><suffix>`, which `.gitignore` ignores (`*.tmp-*`); the
destination's suffix is kept so that writers that check it (Keras `.keras`,
`numpy.savez` `.npz`) accept the temporary path.

Usage::

    with atomic_output(model_path) as tmp:
        model.save(tmp)
    atomic_write_text(csv_path, text)
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from baselines.tiles.errors import PipelineError


def _default_file_mode() -> int:
    """Mode a plain `open(path, 'w')` would give a new file (0o666 minus umask)."""
    umask = None
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    umask = int(line.split()[1], 8)
                    break
    except (OSError, ValueError, IndexError):
        umask = None
    if umask is None:  # Not Linux: read the umask by setting it and restoring it.
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


def _fsync_file(path: Path) -> None:
    """Flushes a written file to disk (best effort: some filesystems refuse)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], suffix: str | None = None) -> Iterator[Path]:
    """Yields a temporary path beside `path`; renames it onto `path` on success.

    The temporary file exists (empty) when the block starts; the block writes it
    (overwriting is fine). If the block raises, the temporary file is deleted, the
    exception propagates, and `path` is unchanged. `suffix` defaults to the
    destination's suffix. Raises `PipelineError` when the directory of `path` does
    not exist or cannot be written, or when the final rename fails.
    """
    dest = Path(path)
    parent = dest.parent
    if not parent.is_dir():
        raise PipelineError(f"cannot write {dest}: directory {parent} does not exist")
    if dest.is_dir():
        raise PipelineError(f"cannot write {dest}: it is a directory")
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f"{dest.name}.tmp-",
            suffix=dest.suffix if suffix is None else suffix,
            dir=parent,
        )
    except OSError as e:
        raise PipelineError(f"cannot write {dest}: {e.strerror or e}") from e
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        if not tmp.is_file():
            raise PipelineError(f"cannot write {dest}: the writer left no file at {tmp}")
        os.chmod(tmp, _default_file_mode())
        _fsync_file(tmp)
        try:
            os.replace(tmp, dest)
        except OSError as e:
            raise PipelineError(f"cannot write {dest}: {e.strerror or e}") from e
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Writes `text` to `path` atomically (complete file or no change at all)."""
    with atomic_output(path) as tmp:
        try:
            with open(tmp, "w", encoding=encoding, newline="") as f:
                f.write(text)
        except OSError as e:
            raise PipelineError(f"cannot write {path}: {e.strerror or e}") from e


def _default_dir_mode() -> int:
    """Mode a plain `os.mkdir` would give a new folder (0o777 minus umask).

    `tempfile.mkdtemp` makes 0o700 folders; published outputs should look like
    every other output of the user's, so their mode is set from the umask.
    """
    file_mode = _default_file_mode()  # 0o666 & ~umask: the umask's r/w bits
    execute = (file_mode & 0o444) >> 2  # search permission wherever read is allowed
    return file_mode | execute


def _make_temp_dir(dest: Path) -> Path:
    if not dest.parent.is_dir():
        raise PipelineError(f"cannot write {dest}: directory {dest.parent} does not exist")
    try:
        return Path(tempfile.mkdtemp(prefix=f"{dest.name}.tmp-", dir=dest.parent))
    except OSError as e:
        raise PipelineError(f"cannot write {dest}: {e.strerror or e}") from e


_DEST_TAKEN = (errno.ENOTEMPTY, errno.EEXIST)


def _swap_in(tmp: Path, dest: Path, attempts: int = 20) -> None:
    """Renames folder `tmp` onto `dest`, moving an existing `dest` aside first.

    Several processes may publish the same folder at once (two runs with the
    same hash, Beam workers sharing a cache): each attempt moves the current
    `dest` aside and renames its own folder in; a rename that loses the race
    finds `dest` taken again and retries. The last writer wins, nobody fails.
    """
    for _ in range(attempts):
        try:
            os.rename(tmp, dest)  # atomic; fails if another non-empty `dest` exists
            return
        except OSError as e:
            if e.errno not in _DEST_TAKEN:
                raise
        old = Path(tempfile.mkdtemp(prefix=f"{dest.name}.tmp-old-", dir=dest.parent))
        try:
            os.rename(dest, old / dest.name)
        except FileNotFoundError:
            pass  # another writer moved it aside first
        finally:
            shutil.rmtree(old, ignore_errors=True)
    raise OSError(errno.EBUSY, f"{dest} kept changing under {attempts} concurrent writers")


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yields an empty temporary folder beside `path`; swaps it onto `path` on success.

    An existing `path` is replaced only after the block succeeded, so a crash
    leaves either the old folder or nothing, never a half-written one. With
    concurrent writers of the same `path`, every writer succeeds and the last
    one's folder stays.
    """
    dest = Path(path)
    tmp = _make_temp_dir(dest)
    try:
        yield tmp
        os.chmod(tmp, _default_dir_mode())
        _swap_in(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def publish_once(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Like `atomic_directory` for content-addressed folders: the first writer wins.

    For folders whose name is a hash of their content (caches): when another
    process has published `path` while this one was writing, both hold the same
    content, so this one's copy is dropped and the winner's is kept.
    """
    dest = Path(path)
    tmp = _make_temp_dir(dest)
    try:
        yield tmp
        os.chmod(tmp, _default_dir_mode())
        try:
            os.rename(tmp, dest)
        except OSError as e:
            if e.errno not in _DEST_TAKEN:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
