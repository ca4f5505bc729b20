"""Whether the disk under a SQLite file refuses its reads: told apart from a damaged file.

SQLite in WAL mode answers "database disk image is malformed" when a read of the file or its
WAL fails with EIO, the same words as for a file that is damaged. The two ask for different
things (try again shortly; restore from a backup), so before a SQLite error is called damage
the file is read again through the descriptors SQLite itself holds open on it and its WAL
(``/proc/self/fd``, Linux): a descriptor is never opened and closed here, as closing one would
drop the POSIX locks SQLite holds on the file. Any read of them failing says it is the disk.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

CHUNK = 1 << 20
MAX_BYTES = 256 << 20  # read at most this much of each file: an error path, kept bounded


def _open_descriptors(paths: set[str]) -> list[int]:
    found = []
    try:
        entries = os.listdir("/proc/self/fd")
    except OSError:  # not Linux: nothing to read through
        return []
    for entry in entries:
        try:
            if os.readlink(f"/proc/self/fd/{entry}") in paths:
                found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def reads_fail(db: str | os.PathLike[str]) -> bool:
    """Whether reading the SQLite file ``db`` or its WAL fails now (EIO and the like), through
    the descriptors this process already holds on them; False when it holds none."""
    path = str(Path(db).resolve())
    for fd in _open_descriptors({path, path + "-wal"}):
        offset = 0
        while offset < MAX_BYTES:
            try:
                block = os.pread(fd, CHUNK, offset)
            except OSError as exc:
                if exc.errno == errno.EBADF:  # closed meanwhile, not the disk
                    break
                return True
            if not block:
                break
            offset += len(block)
    return False
