"""The judge -> fit -> evaluate verbs on a three-query cut of the embedded demo, through the console entry point.

The verbs run in this process (``rcp_jax.cli.main``, what the console script calls) with stdout and
stderr captured at the file-descriptor level, so ``--json`` output must still be nothing but JSON;
the console script itself runs as a subprocess in ``test_demo_cli`` and ``test_cli``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from rcp_jax.judging import SimulatedJudge
from rcp_jax.cli import main
from rcp_jax.pipeline import PipelineInput, judge_collection_sync



@pytest.fixture(scope="module")
def tiny(demo_tiny, tmp_path_factory):
    """(a folder for this module's outputs holding runs.csv and qrels.txt, the rows.jsonl to judge)."""
    folder = tmp_path_factory.mktemp("tiny")
    for name in ("runs", "qrels"):
        shutil.copy(demo_tiny[name], folder / demo_tiny[name].name)
    return folder, demo_tiny["rows"]


def test_estimate_calls_nothing(tiny, cli):
    folder, rows = tiny
    out = cli("judge", "--rows", str(rows), "--estimate", "--store", str(folder / "never"), "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["calls"] == plan["per_stage"]["tournament"]["calls"] + plan["per_stage"]["rubric"]["calls"] > 0
    assert plan["input_tokens"] > 0
    assert not (folder / "never").exists()


def test_judge_fit_evaluate_round_trip(tiny, cli):
    folder, rows = tiny
    store, fitted = folder / "store", folder / "fit"
    first = cli("judge", "--rows", str(rows), "--store", str(store), "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["calls"] > 0
    again = cli("judge", "--rows", str(rows), "--store", str(store), "--json")
    assert json.loads(again.stdout)["calls"] == 0
    fit = cli("fit", "--store", str(store), "--out", str(fitted), "--method", "map", "--json")
    assert fit.returncode == 0, fit.stderr
    info = json.loads(fit.stdout)
    assert info["queries"] == 3 and info["documents"] == 24 and abs(sum(info["gamma"]) - 5) < 1e-4
    ev = cli("evaluate", "--calibration", str(fitted / "calibration"), "--runs", str(folder / "runs.csv"),
             "--qrels", str(folder / "qrels.txt"), "--k", "5", "--json", "--out", str(folder / "eval"))
    assert ev.returncode == 0, ev.stderr
    systems = json.loads(ev.stdout)["systems"]
    assert set(systems) == {"bm25", "oracle_noisy"}
    for metrics in systems.values():
        # beside the nDCGs, ir_measures' default measures with --qrels (tests/cli/test_evaluate_trec_outputs.py)
        assert set(metrics) - {"P@10", "RR", "AP", "R@100"} == {"rcp_ndcg", "count_ndcg", "qrel_ndcg"}
        assert all(0 <= v <= 1 for v in metrics.values())
    per_query = pd.read_csv(folder / "eval" / "per_query.csv")
    assert len(per_query) == 6


def test_fit_refuses_a_store_mixing_judge_families(tiny, tmp_path):
    _, rows_path = tiny
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    pools = {r["query_id"]: r["doc_ids"] for r in rows}
    docs = {d: t for r in rows for d, t in zip(r["doc_ids"], r["docs"])}
    collection = PipelineInput({r["query_id"]: r["query"] for r in rows}, docs, pools)
    latent = {q: {d: float(i) for i, d in enumerate(p)} for q, p in pools.items()}
    for model in ("simulated-a", "simulated-b"):
        judge_collection_sync(collection, judge=SimulatedJudge(latent, model=model), store=tmp_path, progress=False)
    assert main(["fit", "--store", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert main(["fit", "--store", str(tmp_path), "--out", str(tmp_path / "x"), "--family", "simulated-b", "--method", "map"]) == 0


def test_usage_errors_exit_2_with_a_message(tiny, capsys):
    folder, rows = tiny
    assert main(["judge", "--store", str(folder / "s2")]) == 2
    assert "exactly one of --dataset" in capsys.readouterr().err
    assert main(["evaluate", "--calibration", str(folder / "missing"), "--runs", str(folder / "runs.csv")]) == 2
    err = capsys.readouterr().err
    assert str(folder / "missing") in err and "`rcp-jax fit" in err  # names the path and what writes it


@pytest.mark.slow
def test_console_script_keeps_a_persistent_compilation_cache(tiny, cli, tmp_path):
    """`rcp-jax fit` in a fresh process stores its compiled programs in $RCP_JAX_CACHE_DIR (the tests'
    own shared cache, JAX_COMPILATION_CACHE_DIR, is taken out of this one process's environment); with
    RCP_JAX_CACHE_DIR=off the CLI gives JAX no cache folder."""
    _, rows = tiny
    store = tmp_path / "store"
    assert cli("judge", "--rows", str(rows), "--store", str(store), "--quiet").returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(RCP_JAX_CACHE_DIR=str(tmp_path / "cache"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    done = subprocess.run([sys.executable, "-m", "rcp_jax", "fit", "--store", str(store), "--out", str(tmp_path / "fit"),
                           "--method", "map", "--no-plots"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert any((tmp_path / "cache").glob("jit_*")), "no compiled program was cached"
    # the CLI's own set-up with the cache switched off, then JAX's view of it (no fit needed to see it)
    env["RCP_JAX_CACHE_DIR"] = "off"
    code = ("from rcp_jax.cli import app; app._configure_compilation_cache(); import jax; "
            "print(repr(jax.config.jax_compilation_cache_dir))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "None"
    env["RCP_JAX_CACHE_DIR"] = str(tmp_path / "cache")  # and the same set-up does give JAX the folder
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == repr(str(tmp_path / "cache")), done.stderr[-2000:]


def test_compilation_cache_folder_follows_the_environment(tmp_path):
    from rcp_jax.cli.app import compilation_cache_dir

    assert compilation_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "rcp-jax" / "jax"
    assert compilation_cache_dir({"RCP_JAX_CACHE_DIR": str(tmp_path / "c"), "XDG_CACHE_HOME": "/x"}) == tmp_path / "c"
    for off in ("off", "0", "", "none"):
        assert compilation_cache_dir({"RCP_JAX_CACHE_DIR": off}) is None
    assert compilation_cache_dir({"JAX_COMPILATION_CACHE_DIR": "/j", "RCP_JAX_CACHE_DIR": "/r"}) is None  # JAX's own wins
    assert str(compilation_cache_dir({})).endswith(os.path.join(".cache", "rcp-jax", "jax"))
