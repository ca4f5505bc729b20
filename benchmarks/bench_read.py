"""How fast is reading a large store? Every endpoint of issue 22, on stores of 10k, 100k and
1M captures, on SQLite and PostgreSQL, in one run, with each figure's growth against 10k.

The stores (built once, cached under ``benchmarks/.cache/read-<size>-b<BUILDER>.db``; a change
of the builder bumps ``BUILDER`` and so rebuilds): 10 active similarity evals, then ``size``
captures stored with the library's ``capture_many`` (so the metadata index, the conversation
summaries and the rollup are kept as a live server keeps them), each with its ``captured_at``
given, spread evenly over the last 60 days (so ``since=7d`` selects about an eighth), metadata
``engine`` v1/v2 alternating and ``model`` one of five, 10 turns per conversation; about half
of the results fail (an answer touches 4 of the 10 topics). PostgreSQL: a throwaway server
started as an unprivileged user on a free port of 127.0.0.1, its data directory cached as
``benchmarks/.cache/read-pg-b<BUILDER>`` (one database per size), built the same way.

Then, per store, a real ``simeval serve`` subprocess on 127.0.0.1:

- cold: the first request of each endpoint after the server starts (the OS page cache dropped
  first when this process may: root writing ``/proc/sys/vm/drop_caches``; said when refused);
- warm: after a warm-up, ``--rounds`` interleaved rounds of every endpoint, the median of each;
- export: ``GET /api/results/export`` streamed to /dev/null, rows/s beside the raw ``sqlite3`` +
  ``csv`` rate of the same rows in the same run (``bench_export``'s measuring functions), and
  the server's peak resident memory (``VmHWM``).

The table gives per size the warm median, the growth against 10k, the load average beside it,
and at the largest size the PostgreSQL/SQLite ratio. ``--json FILE`` writes every figure.

    .venv/bin/python benchmarks/bench_read.py --sizes 10k,100k --backend sqlite
    .venv/bin/python benchmarks/bench_read.py --build-only --sizes 1m       # build, no timing
    .venv/bin/python benchmarks/bench_read.py --only dashboard,eval_page --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import pwd
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psutil
import sqlalchemy as sa

from simeval.service import Service
from simeval.web.server_process import running_server

sys.path.insert(0, str(Path(__file__).parent))
# the export's measures are bench_export's (one definition of the raw rate and of the peak)
from bench_export import api_export, peak_mb, raw_export

CACHE = Path(__file__).parent / ".cache"
BUILDER = 2  # bump when the stores built change: every cached store is then rebuilt
EVALS = 10
TURNS = 10  # captures per conversation
DAYS = 60
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
DONE = "bench_read_built"
TOPICS = [
    ("capital", "Paris is the capital of France and sits on the river Seine."),
    ("everest", "Mount Everest is the tallest mountain above sea level on Earth."),
    ("jupiter", "Jupiter is the largest planet of the solar system by mass."),
    ("light", "Light travels at about three hundred thousand kilometres per second."),
    ("water", "Water boils at one hundred degrees Celsius at sea level."),
    ("nile", "The Nile is the longest river in Africa and flows north."),
    ("hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    ("pacific", "The Pacific is the largest and deepest ocean of the world."),
    ("moon", "The Moon orbits the Earth about every twenty seven days."),
    ("gold", "The chemical symbol of gold is Au and its atomic number is 79."),
]
EVAL_NAMES = [name for name, _ in TOPICS]


def _output(rng: random.Random) -> str:
    """An answer keeping part of a few of the references: each eval passes or fails it by how
    much of its own reference it kept (about half of the results fail)."""
    parts = []
    for _, ref in rng.sample(TOPICS, 4):
        words = ref.rstrip(".").split()
        keep = rng.uniform(0.5, 1.0)
        parts.append(" ".join(w for w in words if rng.random() < keep))
    return ". ".join(parts) + "."


def make_evals(svc: Service) -> None:
    """The 10 active evals (a threshold most answers pass and some fail)."""
    for name, ref in TOPICS:
        svc.create_eval(name, ref, threshold=0.15)
        svc.test_eval(name, "q", ref)
        svc.activate_eval(name)


def fill(svc: Service, size: int, *, chunk: int = 5_000) -> float:
    """``size`` captures through ``capture_many`` (module docstring); returns the seconds."""
    rng = random.Random(22)
    now = datetime.now(UTC).replace(tzinfo=None)
    start = now - timedelta(days=DAYS)
    step = timedelta(days=DAYS) / size
    started = time.perf_counter()
    for first in range(0, size, chunk):
        rows = [
            {
                "input": f"Question {i % 997}: tell me a fact",
                "output": _output(rng),
                "conversation_id": f"conv-{i // TURNS}",
                "metadata": {"engine": "v2" if i % 2 else "v1", "model": f"model-{i % 5}"},
                "captured_at": (start + step * i).isoformat(),
            }
            for i in range(first, min(first + chunk, size))
        ]
        svc.capture_many(rows)
        done = min(first + chunk, size)
        took = time.perf_counter() - started
        if done % 50_000 == 0 or done == size:
            print(f"  {done:,} captures, {done / took:,.0f}/s", flush=True)
    return time.perf_counter() - started


def sqlite_store(size: int) -> Path:
    """The cached SQLite store of ``size`` captures, built when missing (to a ``.part`` name,
    renamed when complete: a half-built file is never taken for a built one)."""
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"read-{size}-b{BUILDER}.db"
    if path.exists():
        return path
    part = path.with_name(path.name + ".part")
    for p in (part, Path(f"{part}-wal"), Path(f"{part}-shm")):
        p.unlink(missing_ok=True)
    print(f"building {path.name} …", flush=True)
    started = time.perf_counter()
    svc = Service(part)
    make_evals(svc)
    fill(svc, size)
    svc.close()
    db = sqlite3.connect(part, isolation_level=None)
    db.execute("INSERT INTO settings (key, value) VALUES (?, 'true')", (DONE,))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    part.rename(path)
    took = time.perf_counter() - started
    _note_build(f"sqlite-{size}", took)
    print(f"  built in {took:.0f} s", flush=True)
    return path


def _note_build(name: str, seconds: float) -> None:
    with open(CACHE / f"read-builds-b{BUILDER}.txt", "a", encoding="utf-8") as f:
        f.write(f"{name} {seconds:.0f} s {datetime.now(UTC):%Y-%m-%d %H:%M} load {_load()}\n")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- PostgreSQL: one throwaway server, its data directory kept under the cache ---------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgServer:
    """A PostgreSQL server on a free port of 127.0.0.1 over a data directory kept between runs
    (``initdb`` the first time); as an unprivileged user when run as root (``postgres``), as
    tests/conftest.py runs its own. Trust authentication for user ``simeval``: loopback only."""

    def __init__(self, data: Path):
        found = shutil.which("pg_ctl")
        versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not found and not versions:
            raise RuntimeError("PostgreSQL's server binaries (pg_ctl, initdb) are not installed")
        self.bindir = Path(os.path.realpath(found)).parent if found else Path(versions[-1]).parent
        self.data = data
        self.user = "postgres" if os.geteuid() == 0 else None
        self.port = _free_port()
        self.url = f"postgresql+psycopg://simeval@127.0.0.1:{self.port}"

    def _run(self, *argv: str, timeout: float = 300) -> None:
        cmd = list(argv) if self.user is None else ["runuser", "-u", self.user, "--", *argv]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            shutil.rmtree(self.data, ignore_errors=True)
            self.data.mkdir(parents=True)
            if self.user is not None:
                info = pwd.getpwnam(self.user)
                os.chown(self.data, info.pw_uid, info.pw_gid)
            self._run(
                str(self.bindir / "initdb"), "-D", str(self.data), "-U", "simeval",
                "--auth=trust", "--encoding=UTF8", "--no-sync",
            )  # fmt: skip
        opts = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.data} -c shared_buffers=256MB "
            "-c max_connections=100 -c synchronous_commit=off"
        )
        log = str(self.data / "bench.log")
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", log,
            "-w", "-t", "120", "start",
        )  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def database(self, size: int) -> str:
        """The URL of the database of ``size`` captures, built when missing."""
        name = f"read_{size}"
        admin = sa.create_engine(f"{self.url}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            exists = conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
            ).scalar()
            built = False
            if exists:
                db = sa.create_engine(f"{self.url}/{name}")
                with contextlib.suppress(sa.exc.DBAPIError), db.connect() as c:
                    built = bool(
                        c.execute(
                            sa.text("SELECT 1 FROM settings WHERE key = :k"), {"k": DONE}
                        ).scalar()
                    )
                db.dispose()
            if not built:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        url = f"{self.url}/{name}"
        if not built:
            print(f"building PostgreSQL {name} …", flush=True)
            started = time.perf_counter()
            svc = Service(url)
            make_evals(svc)
            fill(svc, size)
            svc.close()
            db = sa.create_engine(url, isolation_level="AUTOCOMMIT")
            with db.connect() as c:
                c.execute(sa.text("VACUUM ANALYZE"))  # as autovacuum would, soon after
                c.execute(
                    sa.text("INSERT INTO settings (key, value) VALUES (:k, 'true')"), {"k": DONE}
                )
            db.dispose()
            took = time.perf_counter() - started
            _note_build(f"postgresql-{size}", took)
            print(f"  built in {took:.0f} s", flush=True)
        return url


# -- the endpoints ----------------------------------------------------------------------------

ENDPOINTS = (
    "health",
    "results_page_middle",
    "api_results_middle",
    "api_results_meta",
    "results_page_meta",
    "api_captures_meta",
    "conversations_page",
    "api_conversations",
    "eval_page",
    "compare",
    "dashboard",
)
TIMED_ONCE = ("export",)  # rows/s, not a warm median


def _span(url: str) -> tuple[datetime, datetime]:
    """The first and last capture time of a store."""
    db = sa.create_engine(url if "://" in url else f"sqlite:///{url}")
    with db.connect() as c:
        lo, hi = c.execute(sa.text("SELECT min(captured_at), max(captured_at) FROM captures")).one()
    db.dispose()
    parse = datetime.fromisoformat
    return (parse(lo) if isinstance(lo, str) else lo), (parse(hi) if isinstance(hi, str) else hi)


def urls_of(client: httpx.Client, span: tuple[datetime, datetime]) -> tuple[dict[str, str], str]:
    """Each endpoint's URL on this store, and how the middle page is reached: by the cursor of
    the result at the middle of the store's time span (the answer of ``until=MIDDLE``) when
    the API pages by cursor, else by an offset of half the results."""
    middle = span[0] + (span[1] - span[0]) / 2
    probe = client.get("/api/results", params={"until": middle.isoformat(), "limit": 1})
    probe.raise_for_status()
    body = probe.json()
    if "next_cursor" in body and body.get("next_cursor"):
        c = quote(body["next_cursor"])
        page, api, how = f"/results?cursor={c}", f"/api/results?cursor={c}", "cursor"
    else:
        total = client.get("/api/results", params={"limit": 1}).json()["total"]
        page = f"/results?page={max(1, total // 2 // 50)}"
        api, how = f"/api/results?offset={total // 2}", "offset"
    name = EVAL_NAMES[0]
    return {
        "health": "/api/health",
        "results_page_middle": page,
        "api_results_middle": api,
        "api_results_meta": "/api/results?meta=engine:v2",
        "results_page_meta": "/results?meta=engine%3Dv2",
        "api_captures_meta": "/api/captures?meta=engine:v2",
        "conversations_page": "/conversations",
        "api_conversations": "/api/conversations",
        "eval_page": f"/evals/{name}",
        "compare": f"/api/compare?a=captures:engine=v1&b=captures:engine=v2&eval={name}",
        "dashboard": "/dashboard",
    }, how


def _timed(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    r = client.get(url)
    took = time.perf_counter() - started
    if r.status_code != 200:
        raise RuntimeError(f"GET {url}: {r.status_code} {r.text[:300]}")
    return took


def drop_caches() -> str | None:
    """Empty the OS page cache (root only); None when done, else why not."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return None
    except OSError as exc:
        return f"not dropped: {exc.strerror or exc}"


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


def measure(
    db: str, names: list[str], rounds: int, export: bool, raw_of: Callable[[], float] | None,
    before_start: Callable[[], None], expected_rows: int,
) -> dict[str, Any]:  # fmt: skip
    """Cold and warm times of ``names`` against a fresh ``simeval serve --db DB``, and the
    export's rate and the server's peak memory when ``export``."""
    out: dict[str, Any] = {"endpoints": {}}
    before_start()
    out["page_cache"] = drop_caches() or "dropped"
    with (
        running_server(db, timeout=300) as (base, proc),
        httpx.Client(base_url=base, timeout=None) as client,
    ):
        server = psutil.Process(proc.pid)
        urls, how = urls_of(client, _span(db))
        out["middle_by"] = how
        cold = {n: _timed(client, urls[n]) for n in names}  # the first of each since the start
        for n in names:  # warm-up
            _timed(client, urls[n])
        warm: dict[str, list[float]] = {n: [] for n in names}
        loads: dict[str, list[float]] = {n: [] for n in names}
        for k in range(rounds):
            order = names if k % 2 == 0 else names[::-1]  # interleaved, alternating order
            for n in order:
                warm[n].append(_timed(client, urls[n]))
                loads[n].append(_load1())
        for n in names:
            out["endpoints"][n] = {
                "url": urls[n],
                "warm_s": statistics.median(warm[n]),
                "rounds_s": warm[n],
                "cold_s": cold[n],
                "load": statistics.median(loads[n]),
            }
        out["server_peak_mb_before_export"] = round(peak_mb(server), 1)
        if export:
            out["export"] = _export(client, server, raw_of, expected_rows)
    return out


def _export(
    client: httpx.Client,
    server: psutil.Process,
    raw_of: Callable[[], float] | None,
    expected: int,
) -> dict[str, Any]:
    """The API's CSV export streamed to /dev/null: rows/s beside the raw rate measured just
    before it, and the server's peak memory after it."""
    raw = raw_of() if raw_of is not None else None
    started = time.perf_counter()
    rows = api_export(client, "csv")
    took = time.perf_counter() - started
    if rows != expected:
        raise RuntimeError(f"the export gave {rows:,} rows, not {expected:,}")
    rate = rows / took
    return {
        "rows": rows,
        "api_s": took,
        "api_rows_per_s": rate,
        "raw_rows_per_s": raw,
        "of_raw": None if raw is None else rate / raw,
        "server_peak_mb": round(peak_mb(server), 1),
        "load": _load1(),
    }


def raw_rate(path: Path) -> float:
    """Rows/s of the raw ``sqlite3`` + ``csv`` export of a SQLite store (to /dev/null)."""
    with open(os.devnull, "w", encoding="utf-8") as null:
        started = time.perf_counter()
        rows = raw_export(path, null)
        return rows / (time.perf_counter() - started)


# -- the report ---------------------------------------------------------------------------------


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def table(report: dict[str, Any]) -> str:
    """The figures as a text table: per backend and endpoint, each size's warm median (growth
    against the smallest size, load average), the cold first request, and PG/SQLite."""
    lines = []
    results = report["results"]
    sizes = report["sizes"]
    for backend, per_size in results.items():
        lines.append(f"\n{backend} (warm median of {report['rounds']} interleaved rounds)")
        head = f"{'endpoint':22s}" + "".join(f"{label(sz):>34s}" for sz in sizes)
        lines.append(head + f"{'cold @' + label(sizes[-1]):>14s}")
        names = [n for n in ENDPOINTS if any(n in per_size[str(z)]["endpoints"] for z in sizes)]
        for n in names:
            base = per_size[str(sizes[0])]["endpoints"].get(n)
            cells = []
            for z in sizes:
                e = per_size[str(z)]["endpoints"].get(n)
                if e is None:
                    cells.append(f"{'-':>34s}")
                    continue
                growth = e["warm_s"] / base["warm_s"] if base else None
                g = f"x{growth:.2f}" if growth is not None else ""
                cells.append(f"{_ms(e['warm_s']):>12s} {g:>8s} (load {e['load']:4.2f})")
            last = per_size[str(sizes[-1])]["endpoints"].get(n)
            cold = _ms(last["cold_s"]) if last else "-"
            lines.append(f"{n:22s}" + "".join(cells) + f"{cold:>14s}")
        for z in sizes:
            ex = per_size[str(z)].get("export")
            if ex:
                of = (
                    f"{ex['of_raw']:.1%} of raw {ex['raw_rows_per_s']:,.0f}/s"
                    if ex["of_raw"]
                    else ""
                )
                lines.append(
                    f"export {label(z)}: {ex['rows']:,} rows in {ex['api_s']:.1f} s = "
                    f"{ex['api_rows_per_s']:,.0f} rows/s {of}; server peak "
                    f"{ex['server_peak_mb']} MB (load {ex['load']:.2f})"
                )
        for z in sizes:
            lines.append(
                f"  {label(z)}: middle page by {per_size[str(z)].get('middle_by')}, page cache "
                f"{per_size[str(z)].get('page_cache')}"
            )
    if "sqlite" in results and "postgresql" in results:
        z = str(sizes[-1])
        lines.append(f"\nPostgreSQL / SQLite at {label(sizes[-1])} (warm medians)")
        for n in ENDPOINTS:
            a = results["sqlite"][z]["endpoints"].get(n)
            b = results["postgresql"][z]["endpoints"].get(n)
            if a and b:
                lines.append(f"  {n:22s} x{b['warm_s'] / a['warm_s']:.2f}")
    return "\n".join(lines)


def label(size: int) -> str:
    return {v: k for k, v in SIZES.items()}.get(size, str(size))


def _tree() -> str:
    """The commit measured, and whether the tree had changes on top of it."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent
        ).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10k,100k,1m", help="of 10k, 100k, 1m")
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument(
        "--only", default=None, help=f"endpoints, of {', '.join(ENDPOINTS + TIMED_ONCE)}"
    )
    parser.add_argument(
        "--export-sizes",
        default=None,
        help="time the export at these sizes only (default: every size; at 1m it streams 10M rows)",
    )
    parser.add_argument(
        "--export-backend", choices=("sqlite", "postgresql", "both"), default="both"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument("--build-only", action="store_true", help="build the stores, time nothing")
    opts = parser.parse_args(argv)
    try:
        sizes = sorted(SIZES[s.strip().lower()] for s in opts.sizes.split(","))
    except KeyError as exc:
        parser.error(f"--sizes: {exc.args[0]!r} is not one of {', '.join(SIZES)}")
    wanted = list(ENDPOINTS + TIMED_ONCE) if opts.only is None else [
        n.strip() for n in opts.only.split(",") if n.strip()
    ]  # fmt: skip
    unknown = [n for n in wanted if n not in ENDPOINTS + TIMED_ONCE]
    if unknown:
        parser.error(f"--only: unknown endpoint(s) {', '.join(unknown)}")
    names = [n for n in ENDPOINTS if n in wanted]
    export = "export" in wanted
    try:
        export_sizes = (
            set(sizes)
            if opts.export_sizes is None
            else {SIZES[s.strip().lower()] for s in opts.export_sizes.split(",")}
        )
    except KeyError as exc:
        parser.error(f"--export-sizes: {exc.args[0]!r} is not one of {', '.join(SIZES)}")
    backends = ["sqlite", "postgresql"] if opts.backend == "both" else [opts.backend]
    report: dict[str, Any] = {
        "tree": _tree(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "sizes": sizes,
        "rounds": opts.rounds,
        "builder": BUILDER,
        "results": {},
    }
    stores = {size: sqlite_store(size) for size in sizes} if "sqlite" in backends or export else {}
    raws: dict[int, float] = {}

    def raw_of(size: int) -> Callable[[], float]:
        def run() -> float:
            raws[size] = raw_rate(stores[size])
            return raws[size]

        return run

    pg = None
    if "postgresql" in backends:
        pg = PgServer(CACHE / f"read-pg-b{BUILDER}")
        pg.start()
    try:
        pg_urls = {size: pg.database(size) for size in sizes} if pg is not None else {}
        if opts.build_only:
            return 0
        for size in sizes:  # both backends of a size, then the next size
            for backend in backends:
                print(f"timing {backend} {label(size)} …", flush=True)
                if backend == "sqlite":
                    db, restart = str(stores[size]), (lambda: None)
                else:
                    assert pg is not None
                    db = pg_urls[size]
                    restart = pg.restart  # its buffers empty too
                exporting = (
                    export and size in export_sizes and opts.export_backend in (backend, "both")
                )
                got = measure(
                    db, names, opts.rounds, exporting, raw_of(size), restart, size * EVALS
                )
                report["results"].setdefault(backend, {})[str(size)] = got
    finally:
        if pg is not None:
            pg.stop()
    report["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    report["load_at_end"] = os.getloadavg()
    builds = CACHE / f"read-builds-b{BUILDER}.txt"
    report["builds"] = builds.read_text().splitlines() if builds.exists() else []
    print(f"\ntree {report['tree']}, {report['cores']} cores, started {report['started']}")
    print(table(report))
    print("\nbuilds (seconds):\n  " + "\n  ".join(report["builds"]))
    if opts.json is not None:
        opts.json.write_text(json.dumps(report, indent=1, default=str))
        print(f"figures written to {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
