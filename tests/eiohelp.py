"""A disk whose reads fail (EIO) while a flag file exists: a small library preloaded into a
server process (``LD_PRELOAD``) whose ``pread``/``pread64`` of files under one path answer
EIO, as a failing disk does, and read normally again once the flag is removed. Compiled with
the system's C compiler (skipped without one, or off Linux)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int failing(int fd) {
    const char *flag = getenv("SIMEVAL_EIO_FLAG");
    const char *under = getenv("SIMEVAL_EIO_UNDER");
    char link[64], path[4096];
    ssize_t n;
    if (!flag || !under || access(flag, F_OK) != 0) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof path - 1);
    if (n < 0) return 0;
    path[n] = 0;
    return strncmp(path, under, strlen(under)) == 0;
}

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);

ssize_t pread(int fd, void *buf, size_t count, off_t offset) {
    static pread_fn real;
    if (!real) real = (pread_fn)dlsym(RTLD_NEXT, "pread");
    if (failing(fd)) { errno = EIO; return -1; }
    return real(fd, buf, count, offset);
}

ssize_t pread64(int fd, void *buf, size_t count, off_t offset) {
    static pread_fn real;
    if (!real) real = (pread_fn)dlsym(RTLD_NEXT, "pread64");
    if (failing(fd)) { errno = EIO; return -1; }
    return real(fd, buf, count, offset);
}
"""


def eio_env(build: Path, under: Path, flag: Path) -> dict[str, str]:
    """The environment of a process whose reads of files under ``under`` fail with EIO while
    ``flag`` exists (the library built in ``build``)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not sys.platform.startswith("linux"):
        pytest.skip("failing reads need a C compiler on Linux")
    build.mkdir(parents=True, exist_ok=True)
    source, lib = build / "eio.c", build / "eio.so"
    source.write_text(SHIM)
    done = subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(source), "-ldl"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot build the failing-read library: {done.stderr.strip()[:200]}")
    return {
        "LD_PRELOAD": str(lib),
        "SIMEVAL_EIO_UNDER": str(under.resolve()),
        "SIMEVAL_EIO_FLAG": str(flag),
    }
