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


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yields an empty temporary folder beside `path`; swaps it onto `path` on success.

    An existing `path` is replaced only after the block succeeded, so a crash
    leaves either the old folder or nothing, never a half-written one.
    """
    dest = Path(path)
    if not dest.parent.is_dir():
        raise PipelineError(f"cannot write {dest}: directory {dest.parent} does not exist")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f"{dest.name}.tmp-", dir=dest.parent))
    except OSError as e:
        raise PipelineError(f"cannot write {dest}: {e.strerror or e}") from e
    try:
        yield tmp
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f"{dest.name}.tmp-old-", dir=dest.parent))
            os.replace(dest, old / dest.name)
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
