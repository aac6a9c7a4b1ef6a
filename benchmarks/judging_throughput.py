"""Judged windows per second against a local OpenAI-compatible server with a fixed per-call latency.

For each concurrency (windows in flight) the same kind of plan is judged twice, each into a fresh store
(fsync per record included):

- ``litellm-http``: :class:`judging.LiteLLMJudge` -> litellm -> HTTP on 127.0.0.1 -> the fake server
  (a separate process, so it does not share this process's CPU) answering after ``--latency`` seconds;
- ``in-process``: :class:`judging.SimulatedJudge` answering after the same latency with no HTTP and no
  litellm: the cost of our own orchestration (render, parse, store) alone.

The ideal rate is ``concurrency / latency``. Both transports are driven by the same simulated judge
(same seed), so their answers must agree window by window; the table reports that agreement.

Usage::

    .venv/bin/python benchmarks/judging_throughput.py                  # 1, 16, 64, 256 at 0.2 s
    .venv/bin/python benchmarks/judging_throughput.py --concurrency 64 --latency 0.2 --windows-per-slot 8

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
sys.path.insert(0, str(REPO))

from judging import LiteLLMJudge, SimulatedJudge, Window, judge_windows, synthetic_dataset  # noqa: E402


def plan(n: int, queries: dict[str, str], documents: dict[str, dict[str, str]], w: int, seed: int) -> list[Window]:
    """``n`` tournament windows of ``w`` random documents, spread over the queries."""
    rng = random.Random(seed)
    qids = sorted(queries)
    return [
        Window(qids[i % len(qids)], "tournament", "bench", i, tuple(rng.sample(sorted(documents[qids[i % len(qids)]]), w)))
        for i in range(n)
    ]


async def run_once(judge, windows, documents, queries, concurrency: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        cpu0, t0 = time.process_time(), time.perf_counter()
        out = await judge_windows(
            windows, judge=judge, store=folder, documents=documents, queries=queries, concurrency=concurrency
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "windows": len(windows),
        "valid": len(out),
        "wall_s": wall,
        "cpu_s": cpu,
        "by_window": {(j.window.query_id, j.window.sequence): j.scores for j in out},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the server waits per call")
    ap.add_argument("--windows-per-slot", type=int, default=6, help="windows judged per unit of concurrency")
    ap.add_argument("--min-windows", type=int, default=24)
    ap.add_argument("--window-size", type=int, default=10)
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--docs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "judging_throughput.json")
    args = ap.parse_args()

    queries, documents, latent = synthetic_dataset(args.queries, args.docs, seed=args.seed)
    server = subprocess.Popen(
        [sys.executable, "-m", "judging.testing_server", "--synthetic", str(args.queries), str(args.docs),
         str(args.seed), "--latency", str(args.latency)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = server.stdout.readline().split()
        if not line or line[0] != "READY":
            raise SystemExit(f"fake server did not start (said {line!r})")
        url = line[1]

        async def bench() -> list[dict]:
            rows = []
            http = LiteLLMJudge("openai/fake-judge", api_base=url, api_key="sk-benchmark", timeout=60,
                                input_cost_per_token=0.0, output_cost_per_token=0.0)
            # warm-up: litellm's first call builds clients and caches (not timed)
            await run_once(http, plan(8, queries, documents, args.window_size, 999), documents, queries, 8)
            for c in args.concurrency:
                n = max(args.min_windows, args.windows_per_slot * c)
                windows = plan(n, queries, documents, args.window_size, args.seed + c)
                ideal = c / args.latency
                results = {}
                for name, judge in (
                    ("litellm-http", LiteLLMJudge("openai/fake-judge", api_base=url, api_key="sk-benchmark",
                                                  timeout=60, input_cost_per_token=0.0, output_cost_per_token=0.0)),
                    ("in-process", SimulatedJudge(latent, seed=args.seed, latency=args.latency)),
                ):
                    r = await run_once(judge, windows, documents, queries, c)
                    results[name] = r
                    rate = r["windows"] / r["wall_s"]
                    rows.append({
                        "transport": name, "concurrency": c, "windows": r["windows"], "valid": r["valid"],
                        "wall_s": round(r["wall_s"], 3), "windows_per_s": round(rate, 1),
                        "ideal_per_s": round(ideal, 1), "ratio_to_ideal": round(rate / ideal, 3),
                        "client_cpu_ms_per_window": round(1e3 * r["cpu_s"] / r["windows"], 2),
                        # windows/s one fully available core could drive at this CPU cost
                        "cpu_ceiling_per_core": round(r["windows"] / max(r["cpu_s"], 1e-9), 1),
                    })
                a, b = results["litellm-http"]["by_window"], results["in-process"]["by_window"]
                agree = sum(a[k] == b.get(k) for k in a) / max(len(a), 1)
                for row in rows[-2:]:
                    row["answers_agree"] = round(agree, 4)
            return rows

        rows = asyncio.run(bench())
    finally:
        server.stdin.close()
        server.wait(timeout=30)

    header = (f"{'transport':<13}{'conc':>5}{'windows':>8}{'valid':>7}{'wall s':>8}{'win/s':>8}{'ideal':>8}"
              f"{'ratio':>7}{'cpu ms/win':>11}{'cpu-bound /s':>13}{'agree':>7}")
    print(f"latency {args.latency}s per call, window size {args.window_size}, cores {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(header)
    for r in rows:
        print(f"{r['transport']:<13}{r['concurrency']:>5}{r['windows']:>8}{r['valid']:>7}{r['wall_s']:>8.2f}"
              f"{r['windows_per_s']:>8.1f}{r['ideal_per_s']:>8.0f}{r['ratio_to_ideal']:>7.2f}"
              f"{r['client_cpu_ms_per_window']:>11.2f}{r['cpu_ceiling_per_core']:>13.0f}{r['answers_agree']:>7.2f}")
    print("ratio = measured / ideal (concurrency / latency); cpu-bound /s = windows per second one whole core "
          "could drive at the measured client CPU per window (the ceiling when the CPU, not the server, binds)")
    from importlib.metadata import version  # noqa: PLC0415

    report = {
        "benchmark": "judging_throughput",
        "latency_s": args.latency,
        "window_size": args.window_size,
        "rows": rows,
        "machine": {"cpus": os.cpu_count(), "load_average_1m": os.getloadavg()[0], "python": platform.python_version(),
                    "platform": platform.platform(), "litellm": version("litellm")},
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
