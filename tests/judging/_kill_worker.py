"""A judging process for the kill / interrupt tests: judges a fixed plan into the store given on argv.

With a third argument N, the calls run in N worker processes (a ProcessJudge whose pids are written
to ``<store>.pids`` once started).

Prints one JSON line at the end: {"calls": answers received, "cached": windows already valid at start,
"valid": valid judgements returned}; on Ctrl-C prints {"interrupted": true, "calls": ...} and exits 130.
"""

from __future__ import annotations

import json
import sys

from pathlib import Path

from rcp_jax.judging import ProcessJudge, SimulatedJudge, Window, judge_windows_sync, synthetic_dataset


def plan() -> tuple[list[Window], dict, dict, dict]:
    queries, documents, latent = synthetic_dataset(4, 20, seed=3, doc_chars=200)
    windows = []
    for qid, docs in documents.items():
        ids = sorted(docs)
        for s in range(6):
            chunk = tuple(ids[(s * 3 + k) % len(ids)] for k in range(5))
            windows.append(Window(qid, "tournament", "round1", s, chunk))
            windows.append(Window(qid, "rubric", "balanced", s, chunk[::-1]))
    return windows, queries, documents, latent


def main() -> None:
    store, latency = sys.argv[1], float(sys.argv[2])
    windows, queries, documents, latent = plan()
    inner = SimulatedJudge(latent, latency=latency, malformed_rate=0.25, seed=5)
    judge = inner
    if len(sys.argv) > 3:
        judge = ProcessJudge(inner, int(sys.argv[3])).start()
        Path(store + ".pids").write_text(" ".join(str(pid) for pid in judge.pids))
    progress = []
    try:
        # like the pipeline: run again while windows are left without a valid answer (fresh attempts)
        for _ in range(5):
            out = judge_windows_sync(
                windows, judge=judge, store=store, documents=documents, queries=queries, concurrency=3,
                progress=progress.append,
            )
            if len(out) == len(windows):
                break
    except KeyboardInterrupt:
        if judge is not inner:
            judge.close()
        print(json.dumps({"interrupted": True, "calls": inner.ledger.calls}), flush=True)
        sys.exit(130)
    if judge is not inner:
        judge.close()
    print(json.dumps({"calls": inner.ledger.calls, "cached": progress[0].cached, "valid": len(out),
                      "windows": len(windows)}), flush=True)


if __name__ == "__main__":
    main()
