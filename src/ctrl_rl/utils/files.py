"""Atomic file writes whose errors name the user's path, not a temp file (numpy- and torch-free).

Every file ctrl_rl writes that a later command reads (checkpoints, replays, datasets, robot logs,
ONNX bundles) goes through :func:`atomic_write`: a temp file beside the target, fsync, the mode
any other file of the run gets, then a rename. A kill leaves the old file or the new one; a full
disk or a read-only directory is an ``OSError`` whose ``filename`` is the target and whose
``strerror`` says what happened, and the old file is untouched.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOW_SPACE = 16 << 20
"""Free bytes below which a failed write is reported as a full disk."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _as_user_error(exc: BaseException, path: Path) -> OSError:
    """``exc`` (raised while writing ``path``) as an OSError about ``path``."""
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = None
    if isinstance(exc, OSError) and exc.errno is not None:
        return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))
    if free is not None and free < LOW_SPACE:
        return OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} ({free >> 20} MiB free)", str(path))
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
    return OSError(errno.EIO, f"write failed: the disk may be full or the file too large ({reason})", str(path))


def _is_write_failure(exc: BaseException) -> bool:
    """An OS-level write failure (torch's zip writer reports one as a RuntimeError)."""
    if isinstance(exc, OSError):
        return True
    text = str(exc)
    markers = ("PytorchStreamWriter", "inline_container", "write failed", "unexpected pos")
    return isinstance(exc, RuntimeError) and any(m in text for m in markers)


@contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """Yield a temp path to write; on success it becomes ``path`` (see the module docstring)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if _is_write_failure(e):
            raise _as_user_error(e, path) from None
        raise  # a bug in what was being written, an interrupt: as it is
    try:
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from None


def describe_os_error(exc: OSError) -> str:
    """One line for a person: ``cannot write 'logs/x': Permission denied``."""
    what = exc.strerror or os.strerror(exc.errno or 0) or str(exc)
    return f"'{exc.filename}': {what}" if exc.filename else what
