"""`simeval run --engines`: engines answer every case, each engine's answers are scored,
stored, compared with the first engine's and gated.

The HTTP engine talks to the OpenAI-compatible upstream of tests/openai_upstream.py, started
in a subprocess on 127.0.0.1 with a key of this module's (its per-model modes: a weak model,
429 with Retry-After, a hang, a 500; its request counter says what the engines asked). The
command and Python engines are small programs written by the tests.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
import textwrap
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from servers import Proc
from simeval.cli import cli
from simeval.runs.engine_http import retry_after
from simeval.runs.engine_run import engine_path, parse_dataset
from simeval.runs.engines import load_engines

HERE = Path(__file__).parents[1]  # tests/, where openai_upstream.py is
SECRET = "sk-engine-" + uuid.uuid4().hex  # the upstream's key: found nowhere it must not be
CAPITALS = [
    ("France", "Paris"),
    ("Japan", "Tokyo"),
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[Proc]:
    old = os.environ.get("UPSTREAM_KEY")
    os.environ["UPSTREAM_KEY"] = SECRET  # the subprocess takes its environment at start
    try:
        proc = Proc([sys.executable, str(HERE / "openai_upstream.py")], r"upstream: (\S+)")
    finally:
        if old is None:
            del os.environ["UPSTREAM_KEY"]
        else:
            os.environ["UPSTREAM_KEY"] = old
    yield proc
    proc.stop()


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ENGINE_TEST_KEY", SECRET)
    return SECRET


def count(upstream: Proc, model: str | None = None) -> int:
    got = httpx.get(upstream.url.removesuffix("/v1") + "/debug/count", timeout=10).json()
    return int(got["chat"] if model is None else got["by_model"].get(model, 0))


def golden(path: Path, n: int = 12, tag: str = "") -> Path:
    """n cases, half about France, half about Japan (``tag`` makes the questions new to the
    upstream: its rate-limit mode remembers questions)."""
    rows = []
    for i in range(n):
        country, city = CAPITALS[i % 2]
        rows.append(
            {
                "id": f"q{i}",
                "input": f"What is the capital of {country}? {tag}{i}",
                "reference": f"{city} is the capital of {country}.",
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def engines_file(path: Path, *entries: dict[str, Any]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"engines": list(entries)}), encoding="utf-8")
    return path


def http(upstream: Proc, name: str, model: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "url": upstream.url,
        "model": model,
        "api_key_env": "ENGINE_TEST_KEY",
        **more,
    }


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.process
def test_two_engines_stored_compared_gated_and_the_key_nowhere(
    tmp_path: Path,
    new_sqlite: Callable[..., str],
    upstream: Proc,
    key: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log every request at DEBUG
    data = golden(tmp_path / "golden.jsonl")
    eng = engines_file(
        tmp_path / "engines.yaml",
        http(upstream, "a", "small-model", system="Answer in one sentence.", temperature=0),
        http(upstream, "b", "weak-model", prices={"prompt": 1.0, "completion": 2.0}),
    )
    db = Path(new_sqlite("runs.db"))
    before = count(upstream)
    res = invoke(
        "run", str(data), "--engines", str(eng), "--store", "--db", str(db),
        "--junit", str(tmp_path / "junit.xml"), "--min-pass-rate", "0.5",
        "--cache", str(tmp_path / "cache.sqlite3"), "--json",
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    assert count(upstream) - before == 24  # every engine asked every case once
    out = json.loads(res.output)
    a, b = out["engines"]
    assert a["engine"]["name"] == "a" and a["run"]["pass_rate"] == 1.0
    assert a["run"]["gates"][0]["passed"] and "comparison" not in a
    assert b["run"]["pass_rate"] == 0.0 and not b["run"]["gates"][0]["passed"]
    assert b["comparison"]["verdict"] == "B worse" and b["worse"] is True
    assert b["run"]["baseline"]["regressed"] == 12  # the first engine's results, case by case
    assert a["answering"]["prompt_tokens"] == 12 * 9 and a["answering"]["cost"] is None
    assert b["answering"]["cost"] == pytest.approx((12 * 9 * 1.0 + 12 * 4 * 2.0) / 1e6)
    assert out["ok"] is False
    # a results file and a JUnit report per engine, with the answers and their numbers
    rows = read_jsonl(tmp_path / "golden.a.results.jsonl")
    assert len(rows) == 12 and rows[0]["engine"] == "a"
    assert rows[0]["output"].startswith("Paris") and rows[0]["prompt_tokens"] == 9
    assert rows[0]["latency_ms"] >= 0 and rows[0]["cached"] is False
    assert read_jsonl(tmp_path / "golden.b.results.jsonl")[0]["output"] == "I am not sure."
    suite = ET.parse(tmp_path / "junit.b.xml").getroot()
    assert suite.find(".//testsuite") is not None or suite.tag == "testsuite"
    assert "failure" in (tmp_path / "junit.b.xml").read_text()
    # two stored runs in one group, each with its engine
    con = sqlite3.connect(db)
    stored = con.execute(
        "SELECT id, name, engine, group_name, dataset_name, dataset_version FROM runs ORDER BY id"
    ).fetchall()
    con.close()
    assert [r[2] for r in stored] == ["a", "b"]
    assert stored[0][3] == stored[1][3] == out["group"]
    assert stored[0][4] is None and stored[0][5] is None
    assert [r[0] for r in stored] == [a["run"]["run_id"], b["run"]["run_id"]]
    # the key: in no stored byte, results file, report, cache, output or log line
    for path in tmp_path.iterdir():
        assert key.encode() not in path.read_bytes(), path.name
    assert key not in res.output and key not in caplog.text
    assert "ENGINE_TEST_KEY" in json.dumps(out)  # the variable's name is what is kept


@pytest.mark.process
def test_an_engine_as_good_as_the_first_exits_0(tmp_path: Path, upstream: Proc, key: str) -> None:
    data = golden(tmp_path / "golden.jsonl")
    eng = engines_file(
        tmp_path / "engines.yaml",
        http(upstream, "a", "small-model"),
        http(upstream, "b", "big-model"),
    )
    (tmp_path / "out").mkdir()
    res = invoke(
        "run", str(data), "--engines", str(eng), "--no-cache", "--min-pass-rate", "0.9",
        "-o", str(tmp_path / "out" / "r.jsonl"),
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "against a: no clear difference" in res.output
    assert (tmp_path / "out" / "r.a.jsonl").exists() and (tmp_path / "out" / "r.b.jsonl").exists()


@pytest.mark.process
def test_the_cache_asks_only_for_what_changed(tmp_path: Path, upstream: Proc, key: str) -> None:
    data = golden(tmp_path / "golden.jsonl", n=6)
    cache = str(tmp_path / "cache.sqlite3")
    base = ["run", str(data), "--engine", upstream.url, "--model", "cached-model"]
    base += ["--api-key-env", "ENGINE_TEST_KEY", "--cache", cache, "--no-results"]
    first = count(upstream, "cached-model")
    assert invoke(*base).exit_code == 0
    assert count(upstream, "cached-model") - first == 6
    res = invoke(*base, "--json")
    assert res.exit_code == 0
    assert count(upstream, "cached-model") - first == 6  # a rerun asks nothing
    answering = json.loads(res.output)["engines"][0]["answering"]
    assert answering["cached"] == 6 and answering["calls"] == 0
    # a changed template is a new prompt: every case is asked again, once
    assert invoke(*base, "--template", "Briefly: {input}").exit_code == 0
    assert count(upstream, "cached-model") - first == 12
    assert invoke(*base, "--template", "Briefly: {input}").exit_code == 0
    assert count(upstream, "cached-model") - first == 12
    # another temperature is another engine; --no-cache asks again
    assert invoke(*base, "--temperature", "0.5").exit_code == 0
    assert count(upstream, "cached-model") - first == 18
    assert invoke(*base, "--no-cache").exit_code == 0
    assert count(upstream, "cached-model") - first == 24


@pytest.mark.process
def test_429_is_retried_after_retry_after(tmp_path: Path, upstream: Proc, key: str) -> None:
    data = golden(tmp_path / "golden.jsonl", n=3, tag=uuid.uuid4().hex)
    eng = engines_file(tmp_path / "e.yaml", http(upstream, "rl", "ratelimit"))
    before = count(upstream, "ratelimit")
    res = invoke("run", str(data), "--engines", str(eng), "--no-cache", "--json")
    assert res.exit_code == 0, res.output
    answering = json.loads(res.output)["engines"][0]["answering"]
    assert answering["answered"] == 3 and answering["errors"] == 0
    assert answering["calls"] == 6 and count(upstream, "ratelimit") - before == 6
    # each answer waited for the Retry-After second
    assert answering["latency_ms_p50"] >= 900


@pytest.mark.process
def test_a_hang_past_the_timeout_and_a_500_are_case_errors(
    tmp_path: Path, upstream: Proc, key: str
) -> None:
    data = golden(tmp_path / "golden.jsonl", n=2)
    eng = engines_file(
        tmp_path / "e.yaml",
        http(upstream, "good", "small-model"),
        http(upstream, "hang", "hang", timeout=0.3),
        http(upstream, "broken", "broken", retries=2),
    )
    before = count(upstream)
    res = invoke("run", str(data), "--engines", str(eng), "--no-cache", "--on-error", "skip")
    assert res.exit_code == 1, res.output
    assert "no answer within 0.3 s (timeout)" in res.output
    assert "HTTP 500: The upstream broke." in res.output
    assert "engine hang answered no case" in res.output
    # good and hang: a call per case; broken: the first try and two retries per case
    assert count(upstream) - before == 2 + 2 + 2 * 3
    # --on-error fail: the first case error stops the run, named, exit 2
    res = invoke("run", str(data), "--engines", str(eng), "--no-cache", "--no-results")
    assert res.exit_code == 2
    assert "golden.jsonl line 1: engine hang: no answer within 0.3 s (timeout)" in res.output


@pytest.mark.process
def test_a_command_engine_and_a_python_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "answer.py").write_text(
        textwrap.dedent(
            """
            import json, sys
            for line in sys.stdin:
                case = json.loads(line)
                if "Japan" in case["input"]:
                    print(json.dumps({"error": "no idea about Japan"}), flush=True)
                elif "garbage" in case["input"]:
                    print("not json", flush=True)
                else:
                    reply = {"output": "Paris is the capital of France.",
                             "usage": {"prompt_tokens": 3, "completion_tokens": 6}}
                    print(json.dumps(reply), flush=True)
            """
        )
    )
    (tmp_path / "my_engine.py").write_text(
        textwrap.dedent(
            """
            CALLS = []
            def answer(case):
                CALLS.append(case)
                if "Japan" in case["input"]:
                    return "Tokyo is the capital of Japan."
                if "garbage" in case["input"]:
                    raise ValueError("cannot read that")
                return {"output": "Paris is the capital of France.",
                        "usage": {"prompt_tokens": 1, "completion_tokens": 2}}
            """
        )
    )
    data = golden(tmp_path / "golden.jsonl", n=4)
    with data.open("a") as fh:
        fh.write(json.dumps({"id": "g", "input": "garbage", "reference": "Paris."}) + "\n")
    eng = engines_file(
        tmp_path / "e.yaml",
        {"name": "cmd", "cmd": f"{sys.executable} answer.py"},
        {"name": "py", "python": "my_engine:answer", "template": "Q: {input}"},
    )
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache", "--on-error",
                 "skip", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    cmd, py = json.loads(res.output)["engines"]
    assert cmd["answering"]["answered"] == 2 and cmd["answering"]["errors"] == 3
    errors = {e["error"] for e in cmd["run"]["skipped_rows"]}
    assert errors == {
        "engine cmd: no idea about Japan",
        "engine cmd: the command's answer is not a JSON line",
    }
    assert cmd["answering"]["prompt_tokens"] == 6  # the two answers' usage
    assert cmd["run"]["pass_rate"] == 1.0
    assert py["answering"]["answered"] == 4 and py["run"]["results"] == 4
    assert py["run"]["skipped_rows"] == [
        {"where": "golden.jsonl line 5", "error": "engine py: ValueError: cannot read that"}
    ]
    rows = read_jsonl(tmp_path / "golden.py.results.jsonl")
    assert {r["output"] for r in rows} == {
        "Paris is the capital of France.",
        "Tokyo is the capital of Japan.",
    }
    import my_engine  # type: ignore[import-not-found]  # the module the run imported

    assert my_engine.CALLS[0]["prompt"].startswith("Q: What is the capital")
    assert my_engine.CALLS[0]["id"] == "q0" and my_engine.CALLS[0]["repeat"] == 0
    sys.modules.pop("my_engine", None)


def test_repeat_gives_the_spread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # answers right on even repeats, wrong on odd ones: a spread to see
    (tmp_path / "flaky.py").write_text(
        "def answer(case):\n"
        "    if case['repeat'] % 2:\n"
        "        return 'No idea.'\n"
        "    return 'Paris is the capital of France.' if 'France' in case['input'] "
        "else 'Tokyo is the capital of Japan.'\n"
    )
    golden(tmp_path / "golden.jsonl", n=4)
    eng = engines_file(tmp_path / "e.yaml", {"name": "flaky", "python": "flaky:answer"})
    cache = str(tmp_path / "c.sqlite3")
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--repeat", "3", "--cache",
                 cache, "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    (flaky,) = json.loads(res.output)["engines"]
    spread = flaky["repeats"]
    assert [r["pass_rate"] for r in spread["per_repeat"]] == [1.0, 0.0, 1.0]
    assert spread["pass_rate"]["min"] == 0.0 and spread["pass_rate"]["max"] == 1.0
    assert spread["pass_rate"]["mean"] == pytest.approx(2 / 3)
    assert flaky["run"]["rows"] == 12
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--repeat", "3", "--cache",
                 cache, "--json")  # fmt: skip
    assert json.loads(res.output)["engines"][0]["answering"]["cached"] == 12
    sys.modules.pop("flaky", None)
    human = invoke("run", "golden.jsonl", "--engines", str(eng), "--repeat", "3", "--cache",
                   cache)  # fmt: skip
    assert "over 3 repeats: pass rate 66.7%" in human.output
    # the spread is read back from a results file of any format
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--repeat", "3", "--cache",
                 cache, "-o", "out.csv", "--json")  # fmt: skip
    spread = json.loads(res.output)["engines"][0]["repeats"]
    assert [r["pass_rate"] for r in spread["per_repeat"]] == [1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "x", "url": "http://h/v1"}, "engine x: model must be a non-empty string"),
        ({"name": "x", "cmd": "a", "python": "m:f"}, "give exactly one of url"),
        ({"name": "x", "python": "nocolon"}, "python must be module:function"),
        ({"name": "x", "cmd": "a", "colour": 1}, "unknown key 'colour'"),
        ({"name": "x", "cmd": "a", "template": "no slot"}, "template must contain {input}"),
        ({"name": "x", "cmd": "a", "timeout": -1}, "timeout must be a number"),
        ({"name": "bad name", "cmd": "a"}, "name must be letters"),
    ],
)
def test_engine_file_mistakes_are_named(
    tmp_path: Path, entry: dict[str, Any], message: str
) -> None:
    eng = engines_file(tmp_path / "e.yaml", entry)
    data = golden(tmp_path / "golden.jsonl", n=2)
    res = invoke("run", str(data), "--engines", str(eng))
    assert res.exit_code == 2
    assert message in res.output and "Traceback" not in res.output


@pytest.mark.process
def test_usage_mistakes(tmp_path: Path, upstream: Proc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGINE_TEST_KEY", raising=False)
    data = str(golden(tmp_path / "golden.jsonl", n=2))
    eng = engines_file(tmp_path / "e.yaml", http(upstream, "a", "small-model"))
    cases = [
        (["--engines", str(eng)], "environment variable ENGINE_TEST_KEY (api_key_env) is not set"),
        (["--repeat", "2"], "--repeat needs --engines"),
        (["--engine", upstream.url], "--engine needs --model"),
        (["--engines", str(eng), "--model", "m"], "--model is for --engine"),
        (["--engines", str(tmp_path / "none.yaml")], "no such engines file"),
        (["--engines", str(eng), "--baseline", "x.jsonl"], "leave out --baseline"),
        (
            ["--engine", upstream.url, "--model", "m", "-o", str(tmp_path / "no" / "r.jsonl")],
            "directory",
        ),
    ]
    for args, message in cases:
        res = invoke("run", data, *args)
        assert res.exit_code == 2, (args, res.output)
        assert message in res.output, (args, res.output)
    res = invoke("run", "dataset:golden")
    assert res.exit_code == 2 and "give --engines" in res.output


def test_a_missing_command_is_a_usage_error(tmp_path: Path) -> None:
    eng = engines_file(tmp_path / "e.yaml", {"name": "c", "cmd": "no-such-program-here"})
    res = invoke("run", str(golden(tmp_path / "g.jsonl", n=2)), "--engines", str(eng))
    assert res.exit_code == 2
    assert "engine c: cannot start 'no-such-program-here'" in res.output


def test_small_parts() -> None:
    assert retry_after("3") == 3.0 and retry_after("-5") == 0.0 and retry_after("1e9") == 60.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after("") is None and retry_after("nan") is None
    assert engine_path(None, "d.jsonl", "a", True) == "d.jsonl"
    assert engine_path("r.csv", "d", "a", True) == "r.a.csv"
    assert parse_dataset("dataset:golden@3") == ("golden", 3)
    from simeval.runs.engine_http import HttpEngine
    from simeval.runs.engines import command_line_engine

    engine = HttpEngine(command_line_engine("http://h/v1", "m", None, None, None, {}), 1)
    engine.headers["authorization"] = "Bearer sk-quoted"
    assert engine._scrub("HTTP 401: bad key sk-quoted") == "HTTP 401: bad key [the API key]"
    for bad in ("dataset:", "dataset:g@0", "dataset:g@x"):
        with pytest.raises(Exception, match="dataset"):
            parse_dataset(bad)


def test_engines_file_reads_every_kind(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(
        textwrap.dedent(
            """
            engines:
              - name: a
                url: http://127.0.0.1:8001/v1/
                model: small-model
                api_key_env: OPENAI_API_KEY
                system: "Answer in one sentence."
                temperature: 0.2
                max_tokens: 50
                params: {top_k: 5}
              - name: c
                cmd: python answer.py --fast
              - name: p
                python: pkg.mod:fn
            """
        )
    )
    a, c, p = load_engines(str(path))
    assert a.kind == "http" and a.url == "http://127.0.0.1:8001/v1"
    assert dict(a.params) == {"top_k": 5, "temperature": 0.2, "max_tokens": 50}
    assert a.prompt("hi") == "hi" and a.api_key_env == "OPENAI_API_KEY"
    assert c.cmd == ("python", "answer.py", "--fast") and p.python == "pkg.mod:fn"
    assert "key" not in json.dumps(a.identity())


@pytest.mark.process
def test_a_stored_data_set_and_its_versions(
    tmp_path: Path, new_sqlite: Callable[..., str], upstream: Proc, key: str
) -> None:
    from simeval.service import Service

    db = Path(new_sqlite("ds.db"))
    svc = Service(str(db))
    svc.import_dataset("golden", str(golden(tmp_path / "golden.jsonl", n=4)))
    # version 2: q1's reference no longer matches what the engine answers
    svc.edit_dataset_case("golden", "q1", references=["Kyoto was the old capital."])
    eng = engines_file(tmp_path / "e.yaml", http(upstream, "a", "small-model"))
    common = ["--engines", str(eng), "--store", "--db", str(db), "--no-cache", "--json"]
    res = invoke("run", "dataset:golden", *common, "-o", str(tmp_path / "v2.jsonl"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["source"] == "dataset:golden@2" and out["dataset_version"] == 2
    assert out["engines"][0]["run"]["passed"] == 3  # the edited case fails
    res = invoke("run", "dataset:golden@1", *common, "-o", str(tmp_path / "v1.jsonl"))
    assert json.loads(res.output)["engines"][0]["run"]["passed"] == 4
    con = sqlite3.connect(db)
    stored = con.execute("SELECT dataset_name, dataset_version, source FROM runs ORDER BY id")
    assert stored.fetchall() == [
        ("golden", 2, "dataset:golden@2"),
        ("golden", 1, "dataset:golden@1"),
    ]
    con.close()
    res = invoke("run", "dataset:nothing", "--engines", str(eng), "--db", str(db))
    assert res.exit_code == 2 and "nothing" in res.output


def test_the_request_body_and_an_async_callable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simeval.runs.engine_http import HttpEngine
    from simeval.runs.engines import command_line_engine

    spec = command_line_engine(
        "http://127.0.0.1:9/v1", "m", None, "Be brief.", "Q: {input}", {"max_tokens": 5}
    )
    body = HttpEngine(spec, 1).body(spec.prompt("hi"))
    assert body == {
        "max_tokens": 5,
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Q: hi"},
        ],
    }
    monkeypatch.chdir(tmp_path)
    (tmp_path / "async_engine.py").write_text(
        "import asyncio\n"
        "async def answer(case):\n"
        "    await asyncio.sleep(0.01)\n"
        "    return 'Paris is the capital of France.'\n"
    )
    golden(tmp_path / "golden.jsonl", n=4)
    eng = engines_file(
        tmp_path / "e.yaml", {"name": "as", "python": "async_engine:answer", "concurrency": 4}
    )
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache", "--json")
    assert res.exit_code == 0, res.output
    run = json.loads(res.output)["engines"][0]["run"]
    assert run["passed"] == 2 and run["results"] == 4  # right about France only
    sys.modules.pop("async_engine", None)


@pytest.mark.process
def test_an_unreachable_engine_is_a_case_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    eng = engines_file(
        tmp_path / "e.yaml",
        {"name": "gone", "url": f"http://127.0.0.1:{port}/v1", "model": "m", "retries": 0},
    )
    data = golden(tmp_path / "g.jsonl", n=2)
    res = invoke("run", str(data), "--engines", str(eng), "--no-cache", "--on-error", "skip")
    assert res.exit_code == 1
    assert f"cannot reach http://127.0.0.1:{port}/v1: ConnectError" in res.output


def test_case_errors_name_the_inputs_own_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "echo_engine.py").write_text("def answer(case):\n    return case['input']\n")
    (tmp_path / "g.csv").write_text(
        "id,input,reference\n"
        "q1,Paris is the capital of France.,Paris is the capital of France.\n"
        'q2,"Tokyo is the capital\nof Japan.",Tokyo is the capital of Japan.\n'
        "q3,,Nothing.\n"
    )
    eng = engines_file(tmp_path / "e.yaml", {"name": "echo", "python": "echo_engine:answer"})
    res = invoke("run", "g.csv", "--engines", str(eng), "--no-cache", "--on-error", "skip",
                 "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    run = json.loads(res.output)["engines"][0]["run"]
    assert run["results"] == 2 and run["passed"] == 2
    assert run["skipped_rows"] == [
        {
            "where": "g.csv line 5",  # the header, q1, q2 on two lines, then q3
            "error": "no input to answer (column 'input' must be a non-empty string)",
        }
    ]
    sys.modules.pop("echo_engine", None)


def test_answers_keep_the_input_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # later cases answer sooner: with 8 in flight they finish out of order
    (tmp_path / "late_engine.py").write_text(
        "import asyncio\n"
        "async def answer(case):\n"
        "    await asyncio.sleep(0.002 * (40 - int(case['id'][1:])))\n"
        "    return case['id']\n"
    )
    golden(tmp_path / "golden.jsonl", n=40)
    eng = engines_file(tmp_path / "e.yaml", {"name": "late", "python": "late_engine:answer"})
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache",
                 "--concurrency", "8")  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = read_jsonl(tmp_path / "golden.late.results.jsonl")
    assert [r["output"] for r in rows] == [f"q{i}" for i in range(40)]
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(40)]
    sys.modules.pop("late_engine", None)


def test_an_engine_that_errs_where_the_first_answers_is_worse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "two_engines.py").write_text(
        "def right(case):\n"
        "    if 'France' in case['input']:\n"
        "        return 'Paris is the capital of France.'\n"
        "    return 'Tokyo is the capital of Japan.'\n"
        "def half(case):\n"
        "    if 'Japan' in case['input']:\n"
        "        raise RuntimeError('no Japan')\n"
        "    return right(case)\n"
    )
    golden(tmp_path / "golden.jsonl", n=12)
    eng = engines_file(
        tmp_path / "e.yaml",
        {"name": "a", "python": "two_engines:right"},
        {"name": "b", "python": "two_engines:half"},
    )
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache", "--on-error",
                 "skip", "--json")  # fmt: skip
    assert res.exit_code == 1, res.output
    _a, b = json.loads(res.output)["engines"]
    # the six answers b gave pass as a's do; its six errors are what makes it worse
    assert b["run"]["pass_rate"] == 1.0 and b["run"]["skipped"] == 6
    assert b["comparison"]["verdict"] == "B worse"
    (only,) = b["comparison"]["evals"]
    assert only["pairs"] == 12 and only["flips_to_fail"] == 6
    sys.modules.pop("two_engines", None)


def test_an_engine_run_prints_its_worst_cases_as_a_file_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "half.py").write_text(
        "def answer(case):\n"
        "    if 'Japan' in case['input']:\n"
        "        return 'I like trains.'\n"
        "    return 'Paris is not the capital of France.'\n"
    )
    golden(tmp_path / "golden.jsonl", n=4)
    eng = engines_file(tmp_path / "e.yaml", {"name": "half", "python": "half:answer"})
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache", "--worst", "3")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())  # the table's cells, whatever the terminal's width
    assert "worst cases of half" in out
    assert "line 2 │ q1" in out and "tokyo, japan" in out  # the missing terms
    assert "output and reference share no terms" in out  # and the reasons
    assert 'contradiction: "not" only in the output' in out
    assert out.count(" FAIL ") == 3  # --worst 3 of the 4 failing cases
    none = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache", "--worst", "0")
    assert none.exit_code == 0 and "worst cases" not in none.output
    as_json = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache", "--json")
    worst = json.loads(as_json.output)["engines"][0]["run"]["worst"]
    assert len(worst) == 4 and worst[0]["reason"] == "output and reference share no terms"
    # rows that match no eval are named on the console too, and fail the run
    evals = tmp_path / "evals.yaml"
    evals.write_text(
        "evals:\n  - name: france\n    input_scope: 'What is the capital of France? 0'\n"
        "    reference: Paris is the capital of France.\n    threshold: 0.1\n",
        encoding="utf-8",
    )
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache", "--evals",
                 str(evals))  # fmt: skip
    assert res.exit_code == 1, res.output
    out = " ".join(res.output.split())
    assert "3 rows matched no eval: golden.jsonl line 2, golden.jsonl line 3" in out
    assert "gate unmatched-rows 0: FAILED (value 3)" in out
    allowed = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache", "--evals",
                     str(evals), "--allow-unmatched")  # fmt: skip
    assert allowed.exit_code == 0, allowed.output
    sys.modules.pop("half", None)


def test_junit_times_are_the_wall_time_of_each_case_and_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # each answer takes at least 50 ms: the engine's time must be in its case's time
    (tmp_path / "slow.py").write_text(
        "import time\n"
        "def answer(case):\n"
        "    time.sleep(0.05)\n"
        "    if 'garbage' in case['input']:\n"
        "        raise ValueError('cannot read that')\n"
        "    return 'Paris is the capital of France.'\n"
    )
    data = golden(tmp_path / "golden.jsonl", n=3)
    with data.open("a") as fh:
        fh.write(json.dumps({"id": "g", "input": "garbage", "reference": "Paris."}) + "\n")
    eng = engines_file(tmp_path / "e.yaml", {"name": "slow", "python": "slow:answer"})
    res = invoke("run", "golden.jsonl", "--engines", str(eng), "--no-cache", "--junit",
                 "junit.xml", "--on-error", "skip", "--concurrency", "1", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    answering = json.loads(res.output)["engines"][0]["answering"]
    latency = {
        r["id"]: r["latency_ms"] / 1000 for r in read_jsonl(tmp_path / "golden.slow.results.jsonl")
    }
    suite = ET.parse(tmp_path / "junit.xml").getroot()[0]
    cases = suite.findall("testcase")
    assert len(cases) == 4 and {c.get("name") for c in cases} >= {"q0", "q1", "q2"}
    for case in cases:
        took = float(case.get("time") or 0)
        assert took >= latency.get(case.get("name") or "", 0.05) >= 0.05, case.attrib
    assert len(latency) == 3
    # the suite's time holds the answering (the four calls one after the other) and scoring
    assert float(suite.get("time") or 0) >= answering["elapsed_s"] >= 0.2
    assert float(suite.get("time") or 0) >= sum(float(c.get("time") or 0) for c in cases)
    sys.modules.pop("slow", None)
