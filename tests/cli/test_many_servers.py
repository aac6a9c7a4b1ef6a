"""Many servers from the command line: ``--api-base`` several times and ``--api-base-file`` (URL [KEY_VARIABLE]
per line), their refusals, and a judge run over two fake servers, one failing, with per-endpoint counts in the
summary and the key nowhere in the store or the output. In process."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmarks.fixtures.fake_server import Fault, FakeOpenAIServer  # noqa: E402
from rcp_jax.cli import build_parser, main  # noqa: E402
from rcp_jax.cli import _judge_options as J  # noqa: E402
from rcp_jax.cli._endpoints import endpoint_summary  # noqa: E402
from rcp_jax.judging import LiteLLMJudge, SimulatedJudge, Window, judge_windows_sync  # noqa: E402

MODEL = "openai/fake-judge"
SECRET = "sk-cli-MANY-SERVERS-secret-55aa"


def judge_args(*extra: str):
    return build_parser().parse_args(["judge", "--rows", "rows.jsonl", "--model", MODEL, *extra])


def test_endpoints_from_flags_and_a_file_reach_the_judge(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU2_KEY", SECRET)
    listing = tmp_path / "servers.txt"
    listing.write_text("# two more servers\n\nhttp://127.0.0.1:9/v1   GPU2_KEY  # its key\nhttp://127.0.0.1:10/v1\n")
    args = judge_args("--api-base", "http://127.0.0.1:8/v1", "--api-base-file", str(listing), "--concurrency", "3")
    judge = J.build_judge(args, None)
    assert isinstance(judge, LiteLLMJudge) and judge.api_base is None
    assert [s["api_base"] for s in judge.endpoint_stats()] == [
        "http://127.0.0.1:8/v1", "http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]
    assert SECRET not in repr(judge) and SECRET not in judge.endpoint_label
    two = judge_args("--api-base", "http://127.0.0.1:8/v1", "--api-base", "http://127.0.0.1:9/v1")
    assert (two.api_base, two.api_bases) == ("http://127.0.0.1:8/v1", ["http://127.0.0.1:8/v1", "http://127.0.0.1:9/v1"])
    assert J.build_judge(two, None).endpoint_stats()[1]["api_base"] == "http://127.0.0.1:9/v1"
    assert two.concurrency == 2 * J.AUTO_CONCURRENCY_SELF_HOSTED  # no server answers /props here
    one = J.build_judge(judge_args("--api-base", "http://127.0.0.1:8/v1"), None)
    assert (one.api_base, one.endpoint_stats()) == ("http://127.0.0.1:8/v1", [])  # one endpoint: no Router


@pytest.mark.parametrize("text, says", [
    (f"http://127.0.0.1:9/v1 {SECRET}\n", "line 1: the second field is not an environment variable name"),
    ("http://127.0.0.1:9/v1 UNSET_KEY_VAR_M\n", "line 1: the environment variable UNSET_KEY_VAR_M"),
    ("# nothing\n", "no endpoint in it"),
    ("\n127.0.0.1:9/v1\n", "line 2: '127.0.0.1:9/v1' is not an endpoint URL"),
    ("http://127.0.0.1:8/v1\n", "given twice (--api-base and --api-base-file"),
    ("http://127.0.0.1:9/v1 A B\n", "line 1: 3 fields"),
])
def test_bad_endpoint_files_are_refused_by_line_without_showing_a_key(demo_tiny, tmp_path, capsys, text, says):
    listing = tmp_path / "servers.txt"
    listing.write_text(text)
    rc = main(["judge", "--rows", str(demo_tiny["rows"]), "--model", MODEL, "--api-base", "http://127.0.0.1:8/v1",
               "--api-base-file", str(listing), "--estimate"])
    err = capsys.readouterr().err
    assert rc == 2 and says in err and str(listing) in err, err
    assert SECRET not in err and "Traceback" not in err


def _demo_windows(demo_tiny) -> tuple[dict, dict, dict, list]:
    """(queries, documents, latent relevance, three 4-document round-1 windows per query) of the demo cut."""
    rows = [json.loads(line) for line in demo_tiny["rows"].read_text().splitlines()]
    queries = {r["query_id"]: r["query"] for r in rows}
    documents = {r["query_id"]: dict(zip(r["doc_ids"], r["docs"])) for r in rows}
    latent = {q: {d: 0.3 * i for i, d in enumerate(docs)} for q, docs in documents.items()}
    windows = [Window(q, "tournament", "round1", s, tuple(sorted(docs))[s:s + 4]) for q, docs in documents.items()
               for s in range(3)]
    return queries, documents, latent, windows


def test_a_judge_built_from_the_flags_counts_each_server(demo_tiny, tmp_path, capfd, monkeypatch):
    """The judge `rcp-jax judge` builds from two endpoints (one failing, its key from the file's variable) over
    real HTTP, and the summary lines it prints; the full judge verb is not run here (its JAX refits cost ~15 s of
    CPU): its three lines of wiring print :func:`endpoint_summary` of this very judge."""
    queries, documents, latent, windows = _demo_windows(demo_tiny)
    monkeypatch.setenv("SECOND_SERVER_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    with FakeOpenAIServer(SimulatedJudge(latent, seed=3), queries=queries, documents=documents) as good, \
            FakeOpenAIServer(SimulatedJudge(latent, seed=3), queries=queries, documents=documents,
                             faults=lambda ctx: Fault(status=503, message=f"down; key {SECRET}")) as bad:
        listing = tmp_path / "servers.txt"
        listing.write_text(f"{bad.url} SECOND_SERVER_KEY\n")
        args = judge_args("--api-base", good.url, "--api-base-file", str(listing), "--concurrency", "2")
        judge = J.build_judge(args, None)
        judge.backoff_base = judge.backoff_max = 0.001
        store = tmp_path / "store"
        out = judge_windows_sync(windows, judge=judge, store=store, documents=documents, queries=queries,
                                 concurrency=args.concurrency)
    assert len(out) == len(windows) and all(j.valid for j in out)
    stats, lines = endpoint_summary(judge)
    counts = {e["api_base"]: e for e in stats}
    assert counts[bad.url]["failed"] == bad.status_counts[503] > 0 and counts[bad.url]["answered"] == 0
    assert counts[good.url]["answered"] == good.status_counts[200] == len(windows) and counts[good.url]["failed"] == 0
    assert lines[0].startswith("calls per endpoint") and f"  {good.url}: {len(windows)} answered, 0 failed" in lines
    assert f"  {bad.url}: 0 answered, {bad.status_counts[503]} failed" in lines
    printed = capfd.readouterr()
    assert SECRET not in printed.out + printed.err + "\n".join(lines)
    assert not any(SECRET.encode() in p.read_bytes() for p in store.rglob("*") if p.is_file())


def test_a_dead_server_beside_a_flaky_one_from_the_flags(demo_tiny, tmp_path, monkeypatch):
    """`--api-base DEAD --api-base FLAKY --max-transport-retries 12` (the flaky server answers 503 to every second
    request): the judge the CLI builds finishes every window and the dead server gets a small share of the tries."""
    import socket

    queries, documents, latent, windows = _demo_windows(demo_tiny)
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    with FakeOpenAIServer(SimulatedJudge(latent, seed=3), queries=queries, documents=documents,
                          faults=lambda ctx: Fault(status=503) if ctx.index % 2 == 0 else None) as flaky:
        args = judge_args("--api-base", dead, "--api-base", flaky.url, "--max-transport-retries", "12",
                          "--concurrency", "2")
        judge = J.build_judge(args, None)
        judge.backoff_base = judge.backoff_max = 0.001
        out = judge_windows_sync(windows, judge=judge, store=tmp_path / "store", documents=documents, queries=queries,
                                 concurrency=args.concurrency)
    assert len(out) == len(windows) and all(j.valid for j in out)
    stats, _ = endpoint_summary(judge)
    counts = {e["api_base"]: e for e in stats}
    tries = sum(e["answered"] + e["failed"] for e in stats)
    assert counts[dead]["answered"] == 0 and 1 <= counts[dead]["failed"] < 0.15 * tries, counts
    assert counts[flaky.url]["answered"] == len(windows)
