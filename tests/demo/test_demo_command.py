"""`rcp-jax demo` end to end: JSON leaderboard with three metrics, a reusable store, the report folder.

The first run is the README's command, the installed ``rcp-jax`` console script in a fresh process;
the second (reusing the store) calls the same entry point, ``rcp_jax.cli.main``, in this process, and so
do the README's Bayesian commands on the demo's report.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rcp_jax.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"

#: every test here runs the demo (a fresh console-script process, then the README's blocks on its report)
pytestmark = pytest.mark.slow


def console_script() -> str:
    script = Path(sys.executable).with_name("rcp-jax")
    if not script.is_file():
        pytest.fail(f"the rcp-jax console script is not installed beside {sys.executable}: pip install -e .")
    return str(script)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """(report folder, JSON result) of the README's demo command in a fresh process; the folder is
    ``<tmp>/rcp_runs/demo``, the demo's default relative to ``<tmp>``."""
    out = tmp_path_factory.mktemp("readme") / "rcp_runs" / "demo"
    first = subprocess.run([console_script(), "demo", "--out", str(out), "--json"], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-2000:]
    return out, json.loads(first.stdout)


def test_demo_runs_offline_twice_and_reuses_the_store(demo_run, capfd):
    out, result = demo_run
    assert result["calls"] > 1000 and result["queries"] == 20
    assert len(result["systems"]) == 6
    for metrics in result["systems"].values():
        assert set(metrics) == {"qrel_ndcg", "count_ndcg", "rcp_ndcg"}
        assert all(0.0 <= v <= 1.0 for v in metrics.values())
    sep = result["pairs_separated"]
    assert sep["rcp_ndcg"]["separated"] > sep["qrel_ndcg"]["separated"]
    for name in ("leaderboard.csv", "per_query.csv", "comparison.md", "item_curves.png", "leaderboard.png",
                 "query_calibration.png", "calibration/items.json", "store/tournament.jsonl", "store/rubric.jsonl",
                 "runs.tsv", "qrels.tsv", "pools.tsv"):
        assert (out / name).is_file(), name

    capfd.readouterr()
    code = main(["demo", "--out", str(out), "--json", "--no-plots"])
    stdout, stderr = capfd.readouterr()
    assert code == 0, stderr[-2000:]
    again = json.loads(stdout)
    assert again["calls"] == 0
    assert again["systems"] == result["systems"]


def test_the_readme_shows_what_the_demo_prints(demo_run):
    """The README's demo table is the demo's output: same systems in the same order, every figure within
    0.01 and each count of separated pairs within one (the compiled float32 fits may group a few round-2 or
    rubric windows differently on another CPU type, which can move the last digits; the table printed since
    2 December had drifted by up to 0.0045 after changes to the schedule and kernels)."""
    _, result = demo_run
    block = re.search(r"```text\nRCP demo:.*?```", README.read_text(), flags=re.S)
    assert block, "README.md has no ```text block starting with 'RCP demo:'"
    rows = re.findall(r"^(\w+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$", block.group(0), flags=re.M)
    shown = {name: tuple(float(v) for v in values) for name, *values in rows}
    assert list(shown) == list(result["systems"]), "the README lists other systems or another order"
    for name, values in shown.items():
        got = tuple(result["systems"][name][m] for m in ("qrel_ndcg", "count_ndcg", "rcp_ndcg"))
        assert max(abs(a - b) for a, b in zip(values, got)) < 0.01, (name, values, got)
    separated = re.search(r"qrel (\d+)/(\d+), count (\d+)/\d+, rcp (\d+)/\d+", block.group(0))
    sep = result["pairs_separated"]
    assert separated, "the README's demo block has no 'qrel a/b, count c/b, rcp d/b' line"
    qrel_shown, pairs_shown, count_shown, rcp_shown = (int(x) for x in separated.groups())
    assert pairs_shown == sep["qrel_ndcg"]["pairs"]
    for shown_count, metric in zip((qrel_shown, count_shown, rcp_shown), ("qrel_ndcg", "count_ndcg", "rcp_ndcg")):
        assert abs(shown_count - sep[metric]["separated"]) <= 1, (metric, shown_count, sep[metric])


def readme_commands(marker: str) -> list[list[str]]:
    """argv of every ``rcp-jax`` line in the README's first bash block that contains ``marker``."""
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        if marker in block:
            lines = block.replace("\\\n", " ").splitlines()
            return [shlex.split(line)[1:] for line in lines if line.startswith(".venv/bin/rcp-jax ")]
    pytest.fail(f"README.md has no bash block containing {marker!r}")


def test_readme_bayesian_commands_run_on_the_demo_report(demo_run, capsys, monkeypatch):
    """The README's `fit --method nuts` / `evaluate --posterior` lines, run as written from the demo's parent
    folder (fewer NUTS draws on one chain, no figures: the figures have their own tests; the 4-chain
    default and its R-hat are checked on the 50 x 60 collection of tests/bayes/test_inference.py)."""
    out, result = demo_run
    fit, evaluate = readme_commands("--posterior")
    assert fit[0] == "fit" and evaluate[0] == "evaluate"
    monkeypatch.chdir(out.parent.parent)  # the README runs from the folder holding rcp_runs/
    capsys.readouterr()
    assert main([*fit, "--warmup", "150", "--draws", "150", "--chains", "1", "--no-plots", "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert fitted["diagnostics"]["divergences"] == 0
    assert main([*evaluate, "--no-plots", "--json"]) == 0
    posterior = json.loads(capsys.readouterr().out)["posterior"]
    systems = pd.DataFrame(posterior["systems"]).set_index("system")
    assert set(systems.index) == set(result["systems"])
    for name, row in systems.iterrows():  # the MAP leaderboard's value lies inside each system's interval
        assert row["lo"] <= result["systems"][name]["rcp_ndcg"] <= row["hi"], name
    assert len(posterior["pairs"]) == 15
    written = Path(evaluate[evaluate.index("--out") + 1])
    assert len(pd.read_csv(written / "posterior_pairs.csv")) == 15


def test_readme_python_block_runs_on_the_demo_report(demo_run, capsys, monkeypatch):
    """The README's Python block, executed as written from the folder holding the demo's report."""
    out, result = demo_run
    # the block on the demo's report (the README has other python blocks, on other data)
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S) if "rcp_runs/demo" in b]
    assert blocks, "README.md has no python block on rcp_runs/demo"
    monkeypatch.chdir(out.parent.parent)
    namespace: dict = {}
    exec(compile(blocks[0], "README.md (python block)", "exec"), namespace)  # noqa: S102 - our own README
    board = namespace["rcp_jax"].leaderboard(namespace["per_query"])
    for system, metrics in result["systems"].items():  # the same numbers as the demo printed
        assert board.loc[system, "rcp_ndcg"] == pytest.approx(metrics["rcp_ndcg"], abs=1e-9)
    post = namespace["post"]
    assert list(post.items["criterion"]) == ["C1", "C2", "C3", "C4", "C5"]
    assert (post.items["beta_lo"] < post.items["beta_hi"]).all()
    printed = capsys.readouterr().out
    assert "P(A > B)" in printed or "p_a_better" in printed
