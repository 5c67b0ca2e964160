"""Atomic file output: a result file is either complete or absent. Temporaries are named
`<name>.tmp-<pid>-<host tag>-<random><suffix>` beside the destination."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from baselines.core.errors import PipelineError


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


def _host_tag() -> str:
    """8 hex digits naming this machine (folders may be shared between machines)."""
    return hashlib.md5(socket.gethostname().encode()).hexdigest()[:8]


def temp_prefix(name: str) -> str:
    """`<name>.tmp-<pid>-<host>-`: the start of every temporary name made here."""
    return f"{name}.tmp-{os.getpid()}-{_host_tag()}-"


_TEMP_NAME = re.compile(r"\.tmp-(\d+)-([0-9a-f]{8})-")
# errno of the disk refusing a write: (what it is, how an error without errno says it).
_WRITE_FAILURES = {
    errno.ENOSPC: ("disk full", "no space left"),
    errno.EDQUOT: ("disk quota exceeded", "quota exceeded"),
    errno.EACCES: ("permission denied", "permission denied"),
    errno.EPERM: ("permission denied", "permission denied"),
    errno.EROFS: ("read-only filesystem", "read-only file system"),
}


def write_failure_kind(error: BaseException) -> str | None:
    """`disk full`, `permission denied`, ... if `error` is the disk refusing a write, else None."""
    code = getattr(error, "errno", None) or -1
    if code in _WRITE_FAILURES:
        return _WRITE_FAILURES[code][0]
    text = str(error).lower()
    return next((kind for kind, needle in _WRITE_FAILURES.values() if needle in text), None)


def describe_write_error(error: BaseException) -> str:
    """The cause of a failed write in a few words: `disk full (No space left on device)`."""
    text = " ".join(str(getattr(error, "strerror", None) or error).split())[:200]
    text = text or type(error).__name__
    kind = write_failure_kind(error)
    return f"{kind} ({text})" if kind else text


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def remove_stale_temporaries(
    folder: Path | str, log: Callable[[str], None] = print, max_age_s: float | None = 24 * 3600
) -> list[str]:
    """Removes `*.tmp-*` leftovers of writers that are gone (this host's: their process ended;
    another's: older than `max_age_s`, None never); returns their names. A model folder a
    killed swap moved aside (`*.tmp-*-old-*`) is put back first when nothing took its place."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        return []
    now = time.time()
    removed, restored = [], []
    # Names filtered before any Path is made: a folder may hold tens of thousands.
    for name in sorted(n for n in os.listdir(folder) if ".tmp-" in n):
        entry = folder / name
        match = _TEMP_NAME.search(name)
        if match and match.group(2) == _host_tag():
            pid = int(match.group(1))
            stale = pid != os.getpid() and not _process_alive(pid)
        else:
            try:
                age = now - entry.lstat().st_mtime
            except OSError:
                continue
            stale = max_age_s is not None and age > max_age_s
        if not stale:
            continue
        if entry.is_dir() and not entry.is_symlink():
            for moved in entry.iterdir():
                original = folder / moved.name
                if "-old-" in entry.name and not original.exists():
                    with contextlib.suppress(OSError):
                        os.rename(moved, original)
                        restored.append(moved.name)
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
        removed.append(entry.name)
    if removed:
        back = f"; put back {', '.join(restored)}" if restored else ""
        shown = ", ".join(removed[:3]) + (
            f" and {len(removed) - 3} more" if len(removed) > 3 else ""
        )
        log(
            f"cleanup: removed {len(removed)} stale temporar{'y' if len(removed) == 1 else 'ies'} "
            f"of killed runs in {folder}: {shown}{back}"
        )
    return removed


def _fsync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _raise_as_write_failure(error: BaseException, dest: Path) -> None:
    """A write that the disk refused (full, quota, permission) as one line naming `dest`."""
    if isinstance(error, PipelineError):
        return
    if isinstance(error, OSError) or write_failure_kind(error) is not None:
        raise PipelineError(f"cannot write {dest}: {describe_write_error(error)}") from error


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], suffix: str | None = None) -> Iterator[Path]:
    """Yields a temporary path (an empty file; `suffix` defaults to the destination's) beside
    `path`, renamed onto it on success, deleted if the block raises; PipelineError if unwritable."""
    dest = Path(path)
    parent = dest.parent
    if not parent.is_dir():
        raise PipelineError(f"cannot write {dest}: directory {parent} does not exist")
    if dest.is_dir():
        raise PipelineError(f"cannot write {dest}: it is a directory")
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=temp_prefix(dest.name),
            suffix=dest.suffix if suffix is None else suffix,
            dir=parent,
        )
    except OSError as e:
        raise PipelineError(f"cannot write {dest}: {describe_write_error(e)}") from e
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
            raise PipelineError(f"cannot write {dest}: {describe_write_error(e)}") from e
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        _raise_as_write_failure(e, dest)
        raise


def read_user_text(path: Path, flag: str, what: str = "") -> str:
    """A file named by a flag, as UTF-8 text; one-line PipelineError when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PipelineError(f"{flag}: {what}{path} not found") from None
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise PipelineError(f"{flag}: cannot read {path} ({reason})") from None


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    with atomic_output(path) as tmp, open(tmp, "w", encoding=encoding, newline="") as f:
        f.write(text)


def _default_dir_mode() -> int:
    """Mode a plain `os.mkdir` would give (0o777 minus umask); `mkdtemp` makes 0o700."""
    file_mode = _default_file_mode()
    execute = (file_mode & 0o444) >> 2  # search permission wherever read is allowed
    return file_mode | execute


def _make_temp_dir(dest: Path) -> Path:
    if not dest.parent.is_dir():
        raise PipelineError(f"cannot write {dest}: directory {dest.parent} does not exist")
    try:
        return Path(tempfile.mkdtemp(prefix=temp_prefix(dest.name), dir=dest.parent))
    except OSError as e:
        raise PipelineError(f"cannot write {dest}: {describe_write_error(e)}") from e


_DEST_TAKEN = (errno.ENOTEMPTY, errno.EEXIST)
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange_paths(a: Path, b: Path) -> None:
    """Swaps two paths atomically (Linux `renameat2(RENAME_EXCHANGE)`); OSError if unsupported."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a), None, str(b))


_NO_EXCHANGE = (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP)


def _swap_in(tmp: Path, dest: Path, attempts: int = 20) -> None:
    """Renames folder `tmp` onto `dest`, replacing it (exchanged, or moved aside and back)."""
    for _ in range(attempts):
        try:
            os.rename(tmp, dest)  # atomic; fails if another non-empty `dest` exists
            return
        except OSError as e:
            if e.errno not in _DEST_TAKEN:
                raise
        try:
            exchange_paths(tmp, dest)
        except FileNotFoundError:
            continue  # another writer moved `dest` away: try the plain rename again
        except OSError as e:
            if e.errno not in _NO_EXCHANGE:
                raise
        else:
            shutil.rmtree(tmp, ignore_errors=True)  # `tmp` now holds the old folder
            return
        old = Path(tempfile.mkdtemp(prefix=temp_prefix(dest.name) + "old-", dir=dest.parent))
        try:
            os.rename(dest, old / dest.name)
        except OSError as e:
            shutil.rmtree(old, ignore_errors=True)
            if isinstance(e, FileNotFoundError):
                continue  # another writer moved it aside first
            raise
        try:
            os.rename(tmp, dest)
        except OSError as e:
            # Put the previous folder back unless another writer's took its place.
            with contextlib.suppress(OSError):
                os.rename(old / dest.name, dest)
            shutil.rmtree(old, ignore_errors=True)
            if e.errno in _DEST_TAKEN:
                continue
            raise
        shutil.rmtree(old, ignore_errors=True)
        return
    raise OSError(errno.EBUSY, f"{dest} kept changing under {attempts} concurrent writers")


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yields an empty temporary folder beside `path`, swapped onto `path` on success. A crash
    leaves the old folder or nothing; of concurrent writers the last one's stays."""
    dest = Path(path)
    tmp = _make_temp_dir(dest)
    try:
        yield tmp
        os.chmod(tmp, _default_dir_mode())
        _swap_in(tmp, dest)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        _raise_as_write_failure(e, dest)
        raise


@contextlib.contextmanager
def publish_once(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Like `atomic_directory` for content-addressed folders (caches): the first writer wins."""
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


# Probes of a folder that a concurrent probe may remove before the write.
PROBE_ATTEMPTS = 5


def check_writable_dir(path: Path, flag: str) -> None:
    """Proves a file can be written in `path` by writing one; folders made for it are removed."""
    created = path
    while not created.parent.exists():
        created = created.parent
    made = not created.exists()
    try:
        for attempt in range(PROBE_ATTEMPTS):
            path.mkdir(parents=True, exist_ok=True)
            try:
                with tempfile.TemporaryFile(dir=path):
                    pass
                break
            except FileNotFoundError:
                # Another worker probing the same new folder removed it meanwhile.
                if attempt == PROBE_ATTEMPTS - 1:
                    raise
    except OSError as e:
        raise PipelineError(
            f"{flag}: {path} is not writable ({e.strerror or e}); choose another folder"
        ) from None
    finally:
        if made:
            shutil.rmtree(created, ignore_errors=True)


def check_output_file(path: Path, flag: str) -> Path:
    """Refuses, before any work, an output file that could not be written; returns it."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise PipelineError(f"{flag}: {path} is a directory; give a file name")
    check_writable_dir(path.parent, flag)
    return path


def ensure_parent(path: Path) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PipelineError(f"cannot write {path}: {describe_write_error(e)}") from None
    return path


def list_npz_files(
    folder: Path | str, max_files: int | None, *, missing: str, empty: str
) -> list[Path]:
    """Sorted `*.npz` files of a folder (the first `max_files`), else `<folder>: missing/empty`."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise PipelineError(f"{folder}: {missing}")
    files = sorted(folder.glob("*.npz"))
    if not files:
        raise PipelineError(f"{folder}: {empty}")
    return files[:max_files] if max_files else files
