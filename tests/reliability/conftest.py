"""Fixtures of the reliability tests: a small collection on disk, a driver to run the CLI in a
subprocess with test hooks (see ``tests/helpers/crash_driver.py``), and one uninterrupted reference run to compare with.

Every subprocess shares one persistent JAX compilation cache (a session folder), so only the first
one compiles: later ones spend their time importing and judging, not in XLA.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

DRIVER = Path(__file__).resolve().parents[1] / "helpers" / "crash_driver.py"
WORDS = ("river engine protein market orbit lattice harbor signal cobalt quartz meadow falcon "
         "Zürich café naïve 東京 résumé").split()
N_QUERIES, N_DOCS = 4, 16
#: share of malformed first answers of the simulated judge in the kill tests (invalid records, re-asks)
MALFORMED_RATE = 0.05


def make_collection(folder: Path) -> dict[str, Path]:
    """Write ``rows.jsonl`` (4 queries x 16 documents, graded qrels), ``runs.csv`` (two systems, tied
    scores included) and ``qrels.txt`` into ``folder``; deterministic."""
    rng = random.Random(5)
    noise = np.random.default_rng(1)
    rows, runs = [], []
    for qi in range(N_QUERIES):
        q = f"q{qi}"
        ids = [f"{q}-d{j:02d}" for j in range(N_DOCS)]
        docs = [" ".join(rng.choice(WORDS) for _ in range(14)) + f" (#{d})" for d in ids]
        qrels = {d: rng.choice([0, 0, 1, 2, 3]) for d in ids[:10]}
        rows.append({"query_id": q, "query": f"what about {rng.choice(WORDS)} {q}?", "doc_ids": ids, "docs": docs,
                     "qrels": qrels})
        for system, sd in (("good", 0.5), ("poor", 2.0)):
            runs += [(system, q, d, round(float(qrels.get(d, 0) + noise.normal(0, sd)), 1)) for d in ids]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "rows.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    pd.DataFrame(runs, columns=["system", "query_id", "doc_id", "score"]).to_csv(folder / "runs.csv", index=False)
    with open(folder / "qrels.txt", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.writelines(f"{r['query_id']} 0 {d} {g}\n" for d, g in r["qrels"].items())
    return {"rows": folder / "rows.jsonl", "runs": folder / "runs.csv", "qrels": folder / "qrels.txt"}


def pipeline_commands(data: dict[str, Path], *, name: str = "reliability") -> list[list[str]]:
    """judge -> fit -> evaluate with relative store/out folders (so every output is path-independent)."""
    return [
        ["judge", "--rows", str(data["rows"]), "--name", name, "--store", "store", "--out", "out", "--quiet"],
        ["fit", "--store", "store", "--out", "out", "--method", "map"],
        ["evaluate", "--calibration", "out/calibration", "--runs", str(data["runs"]), "--qrels", str(data["qrels"]),
         "--out", "out"],
    ]


@dataclass
class Driver:
    """Runs ``tests/helpers/crash_driver.py`` with a spec in a working folder."""

    env: dict[str, str]

    def spec_file(self, cwd: Path, spec: dict) -> Path:
        cwd.mkdir(parents=True, exist_ok=True)
        path = cwd / f"spec-{spec.get('tag', 'run')}.json"
        path.write_text(json.dumps(spec))
        return path

    def run(self, cwd: Path, spec: dict, *, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        path = self.spec_file(cwd, spec)
        return subprocess.run([sys.executable, str(DRIVER), str(path)], cwd=cwd, capture_output=True, text=True,
                              env={**self.env, **(env or {})}, timeout=timeout)

    def start(self, cwd: Path, spec: dict, *, env: dict | None = None) -> subprocess.Popen:
        path = self.spec_file(cwd, spec)
        # Ctrl-C back to its default in the child: a test run started as a shell's background job inherits
        # SIGINT ignored, and Python then never raises KeyboardInterrupt, which the interrupt tests send
        return subprocess.Popen([sys.executable, str(DRIVER), str(path)], cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**self.env, **(env or {})},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.fixture(scope="session")
def driver(tmp_path_factory) -> Driver:
    cache = tmp_path_factory.mktemp("jax-cache")
    env = {
        **os.environ,
        # the session's cache (tests/conftest.py: kept between runs), else a folder of this session
        "JAX_COMPILATION_CACHE_DIR": os.environ.get("JAX_COMPILATION_CACHE_DIR", str(cache)),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        # the driver runs as a script in a working folder: the repository root lets it import the fake judge
        # server (benchmarks.fixtures.fake_server), as pytest's pythonpath does for the tests
        "PYTHONPATH": os.pathsep.join(filter(None, [str(DRIVER.parents[2]), os.environ.get("PYTHONPATH")])),
    }
    return Driver(env)


@pytest.fixture(scope="session")
def collection(tmp_path_factory) -> dict[str, Path]:
    return make_collection(tmp_path_factory.mktemp("collection"))


def output_files(out: Path) -> dict[str, bytes]:
    """Every finished output file under ``out`` (temp files of interrupted writes left out)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not p.name.endswith(".tmp")}


def temp_files(out: Path) -> list[Path]:
    return [p for p in out.rglob("*.tmp")] if out.exists() else []


def read_calls(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Reference:
    folder: Path
    outputs: dict[str, bytes]
    calls: list[dict]
    stdout: str


@pytest.fixture(scope="session")
def reference(driver, collection, tmp_path_factory) -> Reference:
    """One uninterrupted judge -> fit -> evaluate run (it also fills the compilation cache)."""
    folder = tmp_path_factory.mktemp("reference")
    spec = {"tag": "ref", "commands": pipeline_commands(collection), "calls_log": "calls.jsonl",
            "malformed_rate": MALFORMED_RATE}
    done = driver.run(folder, spec, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = output_files(folder / "out")
    assert {"per_query.csv", "leaderboard.csv", "calibration/items.json", "fit.json", "bt.csv"} <= set(outputs)
    return Reference(folder, outputs, read_calls(folder / "calls.jsonl"), done.stdout)


@pytest.fixture(scope="session")
def small_rows(tmp_path_factory) -> Path:
    """``demo.jsonl``: the small collection of ``tests/helpers/small_store.py`` as a rows file."""
    from tests.helpers.small_store import write_rows

    return write_rows(tmp_path_factory.mktemp("small") / "demo.jsonl")


@pytest.fixture(scope="session")
def small_judged(small_rows, tmp_path_factory) -> Path:
    """A store judged completely by ``rcp-jax judge --rows demo.jsonl`` in this process (name 'demo', seed 0).
    Tests copy it before changing anything."""
    from tests.helpers.small_store import cli_judge

    store = tmp_path_factory.mktemp("small-judged") / "store"
    rc, summary, err = cli_judge(small_rows, store)
    assert rc == 0, err
    assert summary["calls"] > 0
    return store
