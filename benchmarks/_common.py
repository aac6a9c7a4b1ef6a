"""Shared helpers of the performance benchmarks: simulated inputs, timing, machine facts, output.

Simulated collections come from :func:`rcp_jax.models.simulate.simulate_judgements` (150 documents per query, 216
tournament windows of 10, ~6.7 rubric placements per document) in blocks of 1,000 queries, cached as
``.npz`` under ``benchmarks/out/cache`` so that every benchmark (and every subprocess) times identical
inputs. Timing: ``cold`` is the first call in a fresh process (compile + run); ``warm`` is the median of
later calls. Peak memory is measured in a child process (its ``VmHWM``), so peaks never mix.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
CACHE = OUT / "cache"
BLOCK = 1000
N_DOCS = 150
WINDOWS_PER_QUERY = 216  # 14.4 placements x 150 docs / 10 per window
RUBRIC_PLACEMENTS = 100 * 10 / 150


# --------------------------------------------------------------------------------------------------
# simulated inputs
# --------------------------------------------------------------------------------------------------
def _block(index: int) -> dict[str, np.ndarray]:
    path = CACHE / f"block{index}_n{N_DOCS}.npz"
    if path.exists():
        with np.load(path) as z:
            return dict(z)
    from rcp_jax.models.simulate import simulate_judgements

    sim = simulate_judgements(
        1000 + index, np.full(BLOCK, N_DOCS), tournament_placements=WINDOWS_PER_QUERY * 10 / N_DOCS,
        rubric_placements=RUBRIC_PLACEMENTS,
    )
    data = {
        "window_docs": sim.window_docs.astype(np.int16), "window_scores": sim.window_scores.astype(np.float32),
        "window_query": sim.window_query.astype(np.int32), "rubric_query": sim.rubric_query.astype(np.int32),
        "rubric_doc": sim.rubric_doc.astype(np.int16), "rubric_answers": sim.rubric_answers,
        "relevance": np.stack(sim.truth.relevance), "gamma": sim.truth.gamma, "beta": sim.truth.beta,
    }
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **data)
    tmp.replace(path)
    return data


def collection(n_queries: int) -> dict[str, np.ndarray]:
    """The first ``n_queries`` queries of the benchmark collection, as flat arrays (numpy).

    Keys: ``window_docs int[W, 10]``, ``window_scores float[W, 10]`` (integer-valued judge scores),
    ``window_query int[W]``, ``rubric_query int[P]``, ``rubric_doc int[P]``, ``rubric_answers int8[P, 5]``,
    ``relevance float[Q, 150]`` (truth), ``n_docs int[Q]``.
    """
    parts = []
    for b in range(-(-n_queries // BLOCK)):
        d = _block(b)
        take = min(BLOCK, n_queries - b * BLOCK)
        wsel = d["window_query"] < take
        rsel = d["rubric_query"] < take
        parts.append({
            "window_docs": d["window_docs"][wsel].astype(np.int64), "window_scores": d["window_scores"][wsel].astype(np.float64),
            "window_query": d["window_query"][wsel].astype(np.int64) + b * BLOCK,
            "rubric_query": d["rubric_query"][rsel].astype(np.int64) + b * BLOCK,
            "rubric_doc": d["rubric_doc"][rsel].astype(np.int64), "rubric_answers": d["rubric_answers"][rsel],
            "relevance": d["relevance"][:take],
        })
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["n_docs"] = np.full(n_queries, N_DOCS)
    return out


# --------------------------------------------------------------------------------------------------
# timing and machine facts
# --------------------------------------------------------------------------------------------------
def timed(fun, *args, repeats: int = 3, **kwargs):
    """``(result, cold_s, warm_s)``: first call (compile + run) and the median of ``repeats`` later calls.

    The process CPU time of the median warm call is kept in ``LAST_CPU["warm_cpu_s"]`` (on a shared
    machine, wall time includes waiting for other users' processes; CPU time does not).
    """
    t = time.perf_counter()
    result = fun(*args, **kwargs)
    cold = time.perf_counter() - t
    warm, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        result = fun(*args, **kwargs)
        warm.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    LAST_CPU["warm_cpu_s"] = statistics.median(cpu) if cpu else float("nan")
    return result, cold, (statistics.median(warm) if warm else float("nan"))


LAST_CPU: dict[str, float] = {}


def once(fun, *args, **kwargs):
    """``(result, wall_s)`` of one call; its process CPU time goes to ``LAST_CPU["once_cpu_s"]``."""
    t, c = time.perf_counter(), time.process_time()
    result = fun(*args, **kwargs)
    LAST_CPU["once_cpu_s"] = time.process_time() - c
    return result, time.perf_counter() - t


def machine() -> dict:
    """CPU model, core count, load averages, date and library versions."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": model, "nproc": os.cpu_count(), "load_avg": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }
    for name in ("jax", "jaxlib", "numpy", "scipy", "choix", "ranx", "girth", "pytrec_eval"):
        try:
            mod = __import__(name)
            info[name] = getattr(mod, "__version__", "installed")
        except Exception:  # noqa: BLE001 - reporting only
            info[name] = "not installed"
    try:
        import jax

        info["jax_backend"] = jax.default_backend()
        info["jax_devices"] = len(jax.devices())
    except Exception:  # noqa: BLE001
        pass
    return info


def peak_rss_of(script: Path, *args: str, timeout: float = 3600) -> dict:
    """Run the benchmark ``script`` (``python -m benchmarks.NAME *args``, from the repository root) in a child
    process; return its peak RSS (GiB), wall time and output.

    The child prints one JSON line with ``self_peak_kib`` (:func:`self_peak_kib`, the kernel's high-water
    mark of its resident set, read just before it exits). Each measurement is a separate process, so
    peaks never mix. (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` is not used: Linux carries the parent's
    maximum RSS across fork and exec, so a child would report at least the parent's peak.)
    """
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{Path(script).stem}", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"ok": False, "error": proc.stderr.strip().splitlines()[-1:] or ["?"], "wall_s": wall}
    child = {}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            child = json.loads(line)
            break
    return {"ok": True, "peak_rss_gib": child.get("self_peak_kib", float("nan")) / 2**20, "wall_s": wall, **child}


def self_peak_kib() -> int:
    """Peak resident set size of this process in KiB (``VmHWM``; reset by exec, unlike ``ru_maxrss``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def write_json(name: str, payload: dict) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=_jsonable))
    return path


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """Plain-text table: ``columns`` = (key, header, format)."""
    head = [h for _, h, _ in columns]
    body = []
    for r in rows:
        line = []
        for key, _, fmt in columns:
            v = r.get(key)
            if v is None or (isinstance(v, float) and np.isnan(v)):
                line.append("-")
            elif isinstance(v, str):
                line.append(v)
            else:
                line.append(format(v, fmt))
        body.append(line)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    fmt_line = lambda cells: "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([fmt_line(head), fmt_line(["-" * w for w in widths]), *(fmt_line(b) for b in body)])


def header(title: str) -> str:
    m = machine()
    return (
        f"{title}\n{m['date']}  cpu: {m['cpu']} x{m['nproc']}  load avg: {m['load_avg']}  "
        f"jax {m.get('jax')} ({m.get('jax_backend')}, {m.get('jax_devices')} device(s))"
    )
