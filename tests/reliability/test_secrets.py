"""With an API key in the environment, judging through litellm (against the local
fake OpenAI-compatible server) + fit + evaluate, with litellm's and Python's debug logging on, write the
key to no file and no output; a 401 whose reply echoes the key is reported without it.
"""

from __future__ import annotations

import logging

import pytest

from benchmarks.fixtures.fake_server import FakeOpenAIServer
from rcp_jax.cli import main
from rcp_jax.judging import SimulatedJudge

from .conftest import pipeline_commands

SECRET = "sk-test-SECRET-7f3a9c1b2d4e6f80"
#: pieces that would betray a partly masked key (providers and loggers often keep a head or a tail)
PIECES = (SECRET, SECRET[len("sk-test-"):], SECRET[-8:], "7f3a9c1b")


def leaks(text: str) -> list[str]:
    return [p for p in PIECES if p in text]


@pytest.mark.slow
def test_the_key_reaches_no_file_and_no_output(driver, collection, tmp_path):
    judge, fit, evaluate = pipeline_commands(collection)
    judge = judge + ["--model", "openai/fake-judge", "--api-base", "{FAKE_URL}", "--concurrency", "8"]
    spec = {"tag": "secrets", "commands": [judge, fit, evaluate], "debug_logging": True,
            "fake_server": {"rows": str(collection["rows"]), "api_key_env": "OPENAI_API_KEY"}}
    done = driver.run(tmp_path, spec, env={"OPENAI_API_KEY": SECRET, "LITELLM_LOG": "DEBUG"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "litellm" in done.stderr.lower() or "litellm" in done.stdout.lower()  # debug logging was on
    assert "POST" in done.stdout + done.stderr  # ... down to the HTTP requests
    assert not leaks(done.stdout) and not leaks(done.stderr)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"store/tournament.jsonl", "out/calibration/items.json", "out/per_query.csv"} <= {
        str(p.relative_to(tmp_path)) for p in files}
    for path in files:
        assert not leaks(path.read_bytes().decode("utf-8", errors="replace")), path


@pytest.fixture()
def refusing_server(collection):
    server = FakeOpenAIServer(SimulatedJudge({}), api_key="sk-" + "the-right-key-000000").start()  # 401 echoes the key sent
    yield server
    server.stop()


def test_a_401_echoing_the_key_is_reported_without_it(collection, refusing_server, tmp_path, monkeypatch, capfd, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("LITELLM_LOG", "DEBUG")
    with caplog.at_level(logging.DEBUG):
        code = main(["judge", "--rows", str(collection["rows"]), "--store", str(tmp_path / "store"), "--quiet",
                     "--model", "openai/fake-judge", "--api-base", refusing_server.url])
    out, err = capfd.readouterr()
    assert code == 3  # the judge failed (authentication)
    assert "refused the credentials (HTTP 401)" in err and "OPENAI_API_KEY" in err and "Traceback" not in err
    assert "Incorrect API key provided" in err  # the endpoint's own words are kept, the key is not
    assert not leaks(out) and not leaks(err)
    assert not leaks("\n".join(r.getMessage() for r in caplog.records))
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert not leaks(path.read_bytes().decode("utf-8", errors="replace")), path
