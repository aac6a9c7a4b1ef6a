"""The device check (benchmarks/gpu_scale.sh) runs end to end as its CPU dry run, ``--tiny``: the refits, NUTS and
the default posterior, each process writing its JSON results."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two processes that compile the BT, 2PL, NUTS and block Laplace programs: ~1.5 min of CPU
def test_gpu_scale_tiny_runs_the_refits_and_the_default_posterior(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_scale.sh"), "--tiny", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    refit = json.loads((tmp_path / "gpu_scale.json").read_text())
    assert refit["backend"] == "cpu" and set(refit["sizes"]) == {"10", "20"}
    post = json.loads((tmp_path / "gpu_posterior.json").read_text())
    # 42 x 50 documents: above the 2,000 that "auto" gives NUTS, so the block Laplace, checked against NUTS
    assert post["method"] == "block_laplace" and "2,100 documents" in post["auto"]
    assert post["cold_s"] > 0 and post["peak_rss_gib"] > 0
    assert post["diagnostics"]["newton_converged"] and post["diagnostics"]["check_queries"] == 3
    # 2,100 correlated documents of one collection: the gains' 90% intervals cover the simulator's truth
    assert 0.8 <= post["coverage"]["gain"] <= 0.97
