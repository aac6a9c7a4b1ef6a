"""Ingesting a batch's results: 100,000 output lines into a fresh store (wall time, peak memory).

Run from the repository root::

    python -m benchmarks.batch_ingest            # 100,000 results, 3 trials
    python -m benchmarks.batch_ingest --n 20000 --repeats 1

The parent writes, once, a results file of ``n`` output lines in the OpenAI batch format (half tournament, half
rubric windows of 5 documents over 2,000 queries; each answer the simulated judge's text, so every line goes
through the real parser) under ``benchmarks/out/batch_ingest/``. Each trial is a fresh child process that builds
the batch's plan (renders every window, as a resumed run does) and then ingests the file into an empty store
(:func:`rcp_jax.judging.batch.ingest.ingest_results`: streamed, parsed as online answers, appended 2,000 records per
write + fsync). Reported: the ingest's wall time (median of the trials), the plan's, records stored, and the
child's peak resident memory (``VmHWM``, plan + ingest + the store's index of valid records); with the machine's
load averages before and after, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "batch_ingest"
QUERIES, DOCS, SIZE = 2000, 20, 5


def windows_and_data(n: int):
    """(windows, queries, documents, latent): ``n`` windows, alternately tournament and rubric, over 2,000 queries."""
    from rcp_jax.judging import Window, synthetic_dataset

    queries, documents, latent = synthetic_dataset(QUERIES, DOCS, seed=34, doc_chars=300)
    qids = sorted(queries)
    per_query = -(-n // len(qids))
    windows = []
    for qid in qids:
        ids = sorted(documents[qid])
        for s in range(per_query):
            chunk = tuple(ids[(s * 3 + k) % len(ids)] for k in range(SIZE))
            stage = "tournament" if s % 2 == 0 else "rubric"
            windows.append(Window(qid, stage, "round1" if stage == "tournament" else "balanced", s // 2,
                                  chunk if s % 4 < 2 else chunk[::-1]))
            if len(windows) == n:
                return windows, queries, documents, latent
    return windows, queries, documents, latent


def write_results(n: int, path: Path) -> None:
    """The results file: one 200 output line per window, the simulated judge's answer as the content."""
    from rcp_jax.judging import SimulatedJudge, record_id

    windows, _, _, latent = windows_and_data(n)
    judge = SimulatedJudge(latent, seed=1, decorate=False)
    families = {s: judge.family(s) for s in ("tournament", "rubric")}
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for i, w in enumerate(windows):
            text, finish = judge.answer(w.stage, w.query_id, list(w.doc_ids))
            body = {"id": f"chatcmpl-{i}", "object": "chat.completion", "created": 0, "model": "judge",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 900, "completion_tokens": len(text) // 4, "total_tokens": 900 + len(text) // 4,
                              "prompt_tokens_details": {"cached_tokens": 0}},
                    "system_fingerprint": "fp_bench"}
            line = {"id": f"batch_req_{i}", "custom_id": record_id(families[w.stage], w),
                    "response": {"status_code": 200, "request_id": f"req_{i}", "body": body}, "error": None}
            fh.write(json.dumps(line) + "\n")
    tmp.replace(path)


def _vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def trial(results: Path, store: Path, n: int) -> dict:
    """One child: plan (render every window), then ingest ``results`` into the empty ``store``."""
    from dataclasses import replace

    from rcp_jax.judging import JudgementStore, SimulatedJudge, record_id
    from rcp_jax.judging.batch.ingest import Planned, ingest_results

    windows, queries, documents, latent = windows_and_data(n)
    judge = SimulatedJudge(latent, seed=1, decorate=False)
    families = {s: judge.family(s) for s in ("tournament", "rubric")}
    started = time.perf_counter()
    plan = {}
    for w in windows:
        texts = tuple(documents[w.query_id][d] for d in w.doc_ids)
        rendered = judge.render(w, queries[w.query_id], texts)
        rid = record_id(families[w.stage], w)
        plan[rid] = Planned(rid, w, families[w.stage], 1, replace(rendered, messages=()), texts)
    plan_s = time.perf_counter() - started
    with JudgementStore(store) as st:
        started, cpu = time.perf_counter(), time.process_time()
        report = ingest_results(results, plan, store=st, batch_id="batch_bench", started_at="2026-01-01T00:00:00+00:00",
                                price=lambda pt, ct: None)
        ingest_s, ingest_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    return {"plan_s": round(plan_s, 2), "ingest_s": round(ingest_s, 2), "ingest_cpu_s": round(ingest_cpu_s, 2), "stored": report.stored, "valid": report.valid,
            "invalid": report.invalid, "peak_rss_mib": round(_vm_hwm_kib() / 1024, 1),
            "store_mib": round(sum(p.stat().st_size for p in store.glob("*.jsonl")) / 2**20, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trial", nargs=2, type=Path, metavar=("RESULTS", "STORE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.trial:
        print(json.dumps(trial(args.trial[0], args.trial[1], args.n)), flush=True)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    results = OUT / f"results_{args.n}.jsonl"
    if not results.exists():
        started = time.perf_counter()
        write_results(args.n, results)
        print(f"wrote {results} ({results.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - started:.0f} s",
              flush=True)
    load_before = [round(x, 2) for x in os.getloadavg()]
    trials = []
    for k in range(args.repeats):
        store = OUT / f"store_{k}"
        shutil.rmtree(store, ignore_errors=True)
        done = subprocess.run([sys.executable, "-m", "benchmarks.batch_ingest", "--n", str(args.n), "--trial",
                               str(results), str(store)], cwd=ROOT, capture_output=True, text=True, check=True)
        trials.append(json.loads(done.stdout.strip().splitlines()[-1]))
        shutil.rmtree(store, ignore_errors=True)
        print(f"trial {k + 1}: {trials[-1]}", flush=True)
    summary = {
        "n": args.n, "trials": trials, "ingest_s_median": statistics.median(t["ingest_s"] for t in trials),
        "plan_s_median": statistics.median(t["plan_s"] for t in trials),
        "ingest_cpu_s_median": statistics.median(t["ingest_cpu_s"] for t in trials),
        "peak_rss_mib_max": max(t["peak_rss_mib"] for t in trials), "nproc": os.cpu_count(),
        "load_avg_before": load_before, "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    print(f"ingest of {args.n:,} results: {summary['ingest_s_median']:.1f} s (median of {args.repeats}); plan "
          f"{summary['plan_s_median']:.1f} s; peak RSS {summary['peak_rss_mib_max']:.0f} MiB; {os.cpu_count()} CPUs, "
          f"load {load_before} -> {summary['load_avg_after']}")


if __name__ == "__main__":
    main()
