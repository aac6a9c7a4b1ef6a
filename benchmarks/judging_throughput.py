"""Judged windows per second against a local OpenAI-compatible server with a fixed per-call latency.

For each latency and each concurrency (windows in flight) the same plan is judged by each transport,
each into a fresh store (fsync per record group included):

- ``litellm``: :class:`judging.LiteLLMJudge` -> litellm -> HTTP on 127.0.0.1 -> the fake server (a
  separate process answering after ``--latency`` seconds), all calls in this process;
- ``litellm xN``: the same judge with its calls spread over N worker processes
  (``judge_windows(..., processes=N)``; one :class:`judging.ProcessJudge`, started before timing and
  kept across concurrencies; its start time is printed);
- ``in-process``: :class:`judging.SimulatedJudge` answering after the same latency with no HTTP and no
  litellm: the cost of our own orchestration (render, parse, store) alone.

The ideal rate is ``concurrency / latency``; ``ratio`` is measured / ideal. ``cpu ms/win`` is the client
CPU per window (this process, plus the workers for ``xN``; the server's CPU is not counted), and
``1-core /s`` is ``1000 / cpu ms/win``: the windows per second one whole core could drive at that cost,
the ceiling when the client's CPU, not the server's latency, binds. Where ``ideal`` is above what the
cores left free by other work can drive, the ratio measures the CPU, not the judging layer. All
transports are answered by the same simulated judge (same seed), so their answers must agree.

Default latency: 2 s. A real judge answering one window of 10 documents reads 4-15k prompt tokens and
writes a JSON object of 10 scores (100-500 tokens, more with reasoning): with prefill at a few thousand
tokens per second and decoding at 30-100 tokens per second per stream on a busy server, that is 2-10 s
per call on hosted APIs and on vLLM / SGLang alike. 0.2 s per call is far faster than any such judge
and mostly measures the client's CPU. Use ``--latency 0.2 0.5 1 2`` to see where the bound moves.

Usage::

    .venv/bin/python -m benchmarks.judging_throughput                    # 1, 16, 64, 256 in flight at 2 s
    .venv/bin/python -m benchmarks.judging_throughput --latency 0.2 0.5 1 2 --processes 2
    .venv/bin/python -m benchmarks.judging_throughput --concurrency 64 --latency 0.5 --windows-per-slot 8

Writes ``benchmarks/out/judging_throughput.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[1]

from rcp_jax.judging import LiteLLMJudge, ProcessJudge, SimulatedJudge, Window, judge_windows, synthetic_dataset  # noqa: E402

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def plan(n: int, queries: dict[str, str], documents: dict[str, dict[str, str]], w: int, seed: int) -> list[Window]:
    """``n`` tournament windows of ``w`` random documents, spread over the queries."""
    rng = random.Random(seed)
    qids = sorted(queries)
    return [
        Window(qids[i % len(qids)], "tournament", "bench", i, tuple(rng.sample(sorted(documents[qids[i % len(qids)]]), w)))
        for i in range(n)
    ]


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user + system) of this process and of ``pids`` (Linux ``/proc``; else this process only)."""
    total = time.process_time()
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


async def run_once(judge, windows, documents, queries, concurrency: int, pids: list[int]) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        cpu0, t0 = cpu_seconds(pids), time.perf_counter()
        out = await judge_windows(
            windows, judge=judge, store=folder, documents=documents, queries=queries, concurrency=concurrency
        )
        wall, cpu = time.perf_counter() - t0, cpu_seconds(pids) - cpu0
    return {"windows": len(windows), "valid": len(out), "wall_s": wall, "cpu_s": cpu,
            "by_window": {(j.window.query_id, j.window.sequence): j.scores for j in out}}


def start_server(args: argparse.Namespace, latency: float) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.fixtures.fake_server", "--synthetic", str(args.queries), str(args.docs),
         str(args.seed), "--latency", str(latency)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    line = server.stdout.readline().split()
    if not line or line[0] != "READY":
        raise SystemExit(f"fake server did not start (said {line!r})")
    return server, line[1]


async def bench_latency(args, latency: float, url: str, data) -> tuple[list[dict], dict]:
    queries, documents, latent = data

    def http_judge() -> LiteLLMJudge:
        return LiteLLMJudge("openai/fake-judge", api_base=url, api_key="sk-benchmark", timeout=120,
                            input_cost_per_token=0.0, output_cost_per_token=0.0)

    info: dict = {}
    pools: dict[str, tuple[ProcessJudge, list[int]]] = {}
    for n in args.processes:
        t0 = time.perf_counter()
        pool = await asyncio.to_thread(ProcessJudge(http_judge(), n).start)
        info[f"litellm x{n} start_s"] = round(time.perf_counter() - t0, 2)
        pools[f"litellm x{n}"] = (pool, pool.pids)
    rows: list[dict] = []
    try:
        # warm-up: litellm's first calls import modules and build clients and caches (not timed);
        # a worker process warms up on its own calls, so the pools get enough to reach every worker
        warm = plan(64, queries, documents, args.window_size, 999)
        await run_once(http_judge(), warm[:16], documents, queries, 16, [])
        for pool, pids in pools.values():
            await run_once(pool, warm, documents, queries, 32, pids)
        for c in args.concurrency:
            n = max(args.min_windows, args.windows_per_slot * c)
            windows = plan(n, queries, documents, args.window_size, args.seed + c)
            ideal = c / latency
            judges = [("litellm", http_judge(), [])]
            judges += [(name, pool, pids) for name, (pool, pids) in pools.items()]
            judges.append(("in-process", SimulatedJudge(latent, seed=args.seed, latency=latency), []))
            results = {}
            for name, judge, pids in judges:
                r = await run_once(judge, windows, documents, queries, c, pids)
                results[name] = r
                rate = r["windows"] / r["wall_s"]
                cpu_ms = 1e3 * r["cpu_s"] / r["windows"]
                rows.append({
                    "latency_s": latency, "transport": name, "concurrency": c, "windows": r["windows"],
                    "valid": r["valid"], "wall_s": round(r["wall_s"], 3), "windows_per_s": round(rate, 1),
                    "ideal_per_s": round(ideal, 1), "ratio_to_ideal": round(rate / ideal, 3),
                    "client_cpu_ms_per_window": round(cpu_ms, 2),
                    "one_core_ceiling_per_s": round(1e3 / max(cpu_ms, 1e-6), 1),
                    "load_average_1m": round(os.getloadavg()[0], 2),
                })
            base = results["in-process"]["by_window"]
            for name, row in zip(results, rows[-len(results):], strict=True):
                a = results[name]["by_window"]
                row["answers_agree"] = round(sum(a[k] == base.get(k) for k in a) / max(len(a), 1), 4)
    finally:
        for pool, _ in pools.values():
            await pool.aclose()
    return rows, info


def print_table(latency: float, rows: list[dict], info: dict) -> None:
    print(f"\nlatency {latency} s per call, window size 10, cores {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.1f} (1 min) at the end" + "".join(f"; {k} {v} s" for k, v in info.items()))
    print(f"{'transport':<13}{'conc':>5}{'windows':>8}{'wall s':>8}{'win/s':>8}{'ideal':>8}{'ratio':>7}"
          f"{'cpu ms/win':>11}{'1-core /s':>10}{'load':>6}{'agree':>7}")
    for r in rows:
        print(f"{r['transport']:<13}{r['concurrency']:>5}{r['windows']:>8}{r['wall_s']:>8.2f}"
              f"{r['windows_per_s']:>8.1f}{r['ideal_per_s']:>8.0f}{r['ratio_to_ideal']:>7.2f}"
              f"{r['client_cpu_ms_per_window']:>11.2f}{r['one_core_ceiling_per_s']:>10.0f}"
              f"{r['load_average_1m']:>6.1f}{r['answers_agree']:>7.2f}")
    for r in rows:
        if r["transport"] != "in-process" and r["concurrency"] == 64:
            need = r["ideal_per_s"] * r["client_cpu_ms_per_window"] / 1e3
            print(f"  64 in flight, {r['transport']}: ratio {r['ratio_to_ideal']:.2f}; "
                  f"the ideal {r['ideal_per_s']:.0f}/s needs {need:.2f} core(s) of client CPU, one core's ceiling is {r['one_core_ceiling_per_s']:.0f}/s "
                  f"({os.cpu_count()} cores here, load average {r['load_average_1m']:.1f}: "
                  f"{'the client CPU binds' if need > 0.5 else 'CPU suffices if the load leaves half a core'})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--latency", type=float, nargs="+", default=[2.0], help="seconds the server waits per call")
    ap.add_argument("--processes", type=int, nargs="*", default=[],
                    help="also run litellm with its calls in N worker processes (one run per N)")
    ap.add_argument("--windows-per-slot", type=int, default=4, help="windows judged per unit of concurrency")
    ap.add_argument("--min-windows", type=int, default=8)
    ap.add_argument("--window-size", type=int, default=10)
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--docs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "judging_throughput.json")
    args = ap.parse_args()

    data = synthetic_dataset(args.queries, args.docs, seed=args.seed)
    all_rows, infos = [], {}
    for latency in args.latency:
        server, url = start_server(args, latency)
        try:
            rows, info = asyncio.run(bench_latency(args, latency, url, data))
        finally:
            server.stdin.close()
            server.wait(timeout=30)
        print_table(latency, rows, info)
        all_rows += rows
        infos[str(latency)] = info
    print("\nratio = measured / ideal (concurrency / latency); cpu ms/win = client CPU per window (workers "
          "included, server excluded); 1-core /s = windows per second one whole core drives at that CPU cost")
    from importlib.metadata import version  # noqa: PLC0415

    report = {
        "benchmark": "judging_throughput",
        "latencies_s": args.latency,
        "window_size": args.window_size,
        "rows": all_rows,
        "worker_start": infos,
        "machine": {"cpus": os.cpu_count(), "load_average_1m": os.getloadavg()[0], "python": platform.python_version(),
                    "platform": platform.platform(), "litellm": version("litellm")},
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
