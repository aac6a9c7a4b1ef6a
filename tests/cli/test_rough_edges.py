"""Counts and summaries the CLI prints, and rough edges a newcomer hit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rcp_jax import schedule as S
from rcp_jax.budget import decide_pairs, run_weights
from rcp_jax.cli import main
from rcp_jax.cli._budget import reach_lines
from tests.helpers.toy_posterior import toy_posterior




@pytest.fixture(scope="module")
def judged(demo_tiny, tmp_path_factory):
    """A store of the three-query demo cut judged by the simulated judge, and the judge's --json payload."""
    folder = tmp_path_factory.mktemp("judged")
    store = folder / "store"
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(store), "--json", "--quiet"])
    assert code == 0
    return folder, store, json.loads(out.getvalue())


def test_judge_json_counts_windows_per_query(judged):
    """Window ids (``round1#0``) repeat across queries: three queries of 8 documents are 3 x 13 windows, not 13."""
    _, _, payload = judged
    counts = S.schedule_counts(8)
    assert payload["tournament_windows"] == 3 * counts.tournament_calls == 39
    assert payload["rubric_windows"] == 3 * counts.rubric_windows
    assert payload["rubric_placements"] == 3 * counts.rubric_windows * 8


def test_judge_summary_gives_tokens_and_wall_time(judged, demo_tiny, cli, tmp_path):
    _, _, payload = judged
    assert payload["prompt_tokens"] > payload["completion_tokens"] > 0
    assert payload["wall_seconds"] >= 0
    out = cli("judge", "--rows", str(demo_tiny["rows"]), "--store", str(tmp_path / "store"), "--quiet")
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("tokens this run:"))
    assert "prompt +" in line and "completion; wall time" in line and line.rstrip().endswith(" s")
    resumed = cli("judge", "--rows", str(demo_tiny["rows"]), "--store", str(tmp_path / "store"), "--json", "--quiet")
    again = json.loads(resumed.stdout)
    assert again["calls"] == 0 and again["prompt_tokens"] == again["completion_tokens"] == 0


# --------------------------------------------------------------------------------------------------
# judge --budget: the undecided pairs judging cannot decide are reported, not only the open ones
# --------------------------------------------------------------------------------------------------
def test_budget_decisions_count_and_name_the_pairs_out_of_reach():
    rng = np.random.default_rng(4)
    post = toy_posterior(rng, q=12, n=12)
    pools = {q: list(post.doc_ids[i]) for i, q in enumerate(post.query_ids)}
    # b and b_twin rank with noise of the same size: their difference is about 0 but varies by query, so the
    # twelve queries alone leave it undecided (outside the ROPE on both sides): out of reach of judging
    noise = {"a": 0.3, "b": 1.3, "b_twin": 1.3, "c": 3.3}
    run = pd.DataFrame([(s, q, d, t + sd * rng.standard_normal())
                        for i, q in enumerate(post.query_ids) for s, sd in noise.items()
                        for d, t in zip(post.doc_ids[i], post.theta[i])], columns=["system", "query_id", "doc_id", "score"])
    dec = decide_pairs(run_weights(run, pools, post.query_ids, k=5), post, k=5, n_bootstrap=400)
    far = dec.out_of_reach
    assert dec.n_decided + dec.n_open + dec.n_out_of_reach == len(dec.pairs) == 6
    assert dec.n_out_of_reach == len(far) >= 1 and not far["reachable"].any() and (far["call"] == "undecided").all()
    assert {frozenset(p) for p in zip(far["system_a"], far["system_b"])} >= {frozenset(("b", "b_twin"))}
    lines = reach_lines(dec)
    assert lines[0].startswith(f"out of reach ({len(far)}:")
    assert any("b vs b_twin" in x or "b_twin vs b" in x for x in lines[1:])
    assert reach_lines(dec, limit=0)[-1].startswith(f"  ... and {len(far)} more")


def test_cli_budget_reports_open_and_out_of_reach(demo_tiny, tmp_path, cli):
    base = ["judge", "--rows", str(demo_tiny["rows"]), "--store", str(tmp_path / "s"), "--runs", str(demo_tiny["runs"]),
            "--budget", "24", "--round-calls", "3"]
    out = cli(*base)
    assert out.returncode == 0, out.stderr
    rounds = [x for x in out.stderr.splitlines() if x.startswith("round ")]
    assert rounds and all(", out of reach " in x for x in rounds)
    summary = next(x for x in out.stdout.splitlines() if x.startswith("pairs decided"))
    assert " open (more judging can decide them), " in summary and summary.endswith(" out of reach")
    payload = json.loads(cli(*base, "--json").stdout)
    assert payload["pairs"] == payload["pairs_decided"] + payload["pairs_open"] + payload["pairs_out_of_reach"]
    assert len(payload["out_of_reach"]) == payload["pairs_out_of_reach"]
    assert all("out_of_reach" in r for r in payload["rounds"])


# --------------------------------------------------------------------------------------------------
# a bootstrap interval end within rounding of zero is zero: it decides nothing about excluding 0
# --------------------------------------------------------------------------------------------------
def test_an_interval_end_of_rounding_noise_does_not_exclude_zero():
    from rcp_jax.stats.paired import ZERO_RTOL, bootstrap_mean_ci, excludes_zero, snap_to_zero

    # mean of -0.1 and 0.1 (and of -0.3, 0.2 and 0.1) is 0 exactly; in floating point the 97.5th percentile
    # of these resamples came out as -5.6e-18 before, an interval "excluding 0" by noise
    d = np.array([[-0.1, -0.2, -0.4, -0.3, 0.1]])
    lo, hi = bootstrap_mean_ci(d, n_bootstrap=200, seed=3047)
    assert lo[0] < -0.1 and hi[0] == 0.0
    assert not excludes_zero(lo, hi)[0]
    # the rule is relative to the differences' size: small real effects are kept
    tiny = d * 1e-9
    lo_t, hi_t = bootstrap_mean_ci(tiny, n_bootstrap=200, seed=3047)
    assert hi_t[0] == 0.0 and lo_t[0] == pytest.approx(lo[0] * 1e-9)
    assert snap_to_zero([5e-13, -5e-13, 2e-12], 1.0).tolist() == [0.0, 0.0, 2e-12]
    assert snap_to_zero(1e-22, 1e-9) == 0.0 and snap_to_zero(1e-20, 1e-30) == 1e-20
    assert ZERO_RTOL == 1e-12
    assert excludes_zero([0.1, -0.2, 0.0, np.nan], [0.2, -0.1, 0.3, 1.0]).tolist() == [True, True, False, False]


def test_compare_reports_which_intervals_exclude_zero_and_no_sign_of_noise():
    from rcp_jax.stats import compare_systems

    # b differs from a by +0.1, +0.2, -0.3 on three queries: a mean difference that is 0 in exact arithmetic
    rows = []
    for q, (x, dx) in enumerate([(0.5, 0.1), (0.4, 0.2), (0.6, -0.3), (0.3, 0.0)]):
        rows += [("a", f"q{q}", x + dx, x + dx), ("b", f"q{q}", x, x), ("c", f"q{q}", 0.1 * q, 0.0)]
    table = pd.DataFrame(rows, columns=["system", "query_id", "qrel_ndcg", "rcp_ndcg"])
    c = compare_systems(table, n_permutations=200, n_bootstrap=300)
    ab = c.pairs.set_index(["metric", "system_a", "system_b"]).sort_index()
    row = ab.loc[("qrel_ndcg", "a", "b")]
    assert row["diff"] == 0.0  # not 1.4e-17
    assert {"ci_excludes_0"} <= set(c.pairs.columns) and {"ci_excludes_0"} <= set(c.overall.columns)
    assert c.pairs["ci_excludes_0"].dtype == bool
    np.testing.assert_array_equal(c.pairs["ci_excludes_0"], (c.pairs["ci_low"] > 0) | (c.pairs["ci_high"] < 0))
    assert c.overall.set_index(["metric", "system_a", "system_b"]).loc[("qrel_ndcg", "a", "b"), "diff"] == 0.0


# --------------------------------------------------------------------------------------------------
# rcp-jax ... | head -1: stdout closed early is a quiet stop, not a traceback
# --------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_stdout_closed_early_stops_quietly(tmp_path):
    import os

    rng = np.random.default_rng(0)
    rows = [(s, f"q{q}", rng.random()) for s in ("a", "b", "c") for q in range(12)]
    table = tmp_path / "per_query.csv"
    pd.DataFrame(rows, columns=["system", "query_id", "rcp_ndcg"]).to_csv(table, index=False)
    env = {**os.environ, "RCP_JAX_CACHE_DIR": "off"}
    cmd = [sys.executable, "-m", "rcp_jax", "compare", str(table), "--permutations", "200", "--bootstrap", "50"]
    whole = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert whole.returncode == 0 and whole.stdout.count("\n") > 1, whole.stderr
    # the reader is gone before the first byte is written (what `| head -1` does to a longer output)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err.decode()
    assert b"Traceback" not in err and b"BrokenPipe" not in err and b"Exception ignored" not in err, err.decode()


def test_an_unknown_option_gets_the_closest_known_one(capsys):
    with pytest.raises(SystemExit) as info:
        main(["judge", "--rows", "x.jsonl", "--datset", "cranfield"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "rcp-jax judge: error: unrecognized arguments: --datset cranfield" in err
    assert "--datset: did you mean --dataset?" in err
    assert "usage: rcp-jax judge" in err  # the verb's usage, not the top-level one
    with pytest.raises(SystemExit):
        main(["compare", "per_query.csv", "--permutatons=10", "--zzzzzz"])
    err = capsys.readouterr().err
    assert "--permutatons: did you mean --permutations?" in err and "--zzzzzz:" not in err


# --------------------------------------------------------------------------------------------------
# rcp_jax.load_calibration takes the folder `rcp-jax fit --out` wrote, as the CLI does
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted(judged):
    folder, store, _ = judged
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["fit", "--store", str(store), "--out", str(folder / "fit"), "--no-plots", "--json"]) == 0
    return folder / "fit"


def test_load_calibration_accepts_the_fit_output_folder(fitted, tmp_path):
    import rcp_jax
    from rcp_jax.errors import DataError

    assert (fitted / "calibration" / "items.json").is_file() and not (fitted / "items.json").exists()
    via_cli_folder = rcp_jax.load_calibration(fitted)
    direct = rcp_jax.load_calibration(fitted / "calibration")
    np.testing.assert_array_equal(via_cli_folder.gamma, direct.gamma)
    pd.testing.assert_frame_equal(via_cli_folder.documents, direct.documents)
    with pytest.raises(DataError, match=r"items\.json not found \(nor .*calibration/items\.json\)"):
        rcp_jax.load_calibration(tmp_path)


# --------------------------------------------------------------------------------------------------
# --concurrency auto on llama-cpp-python: one request at a time, so 1 (not 4 and "raise it")
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def llama_cpp_python_like():
    """A fake server answering like llama-cpp-python: no /props (404), models ``owned_by: "me"``."""
    from rcp_jax.judging import SimulatedJudge
    from rcp_jax.judging.testing_server import FakeOpenAIServer

    server = FakeOpenAIServer(SimulatedJudge({"q": {"d": 0.0}}), model_info={"owned_by": "me", "permissions": []}).start()
    yield server
    server.stop()


def test_llama_cpp_python_is_one_slot(llama_cpp_python_like):
    from rcp_jax.judging.server_info import probe_server

    info = probe_server(llama_cpp_python_like.url, "openai/fake-judge")
    assert (info.context, info.slots) == (None, 1)
    assert info.source == f"GET {llama_cpp_python_like.url}/models: llama-cpp-python, which answers one request at a time"


def test_concurrency_auto_picks_1_on_llama_cpp_python_and_advises_nothing_more(llama_cpp_python_like):
    from rcp_jax.cli import _judge_options as J
    from rcp_jax.cli import build_parser

    args = build_parser().parse_args(["judge", "--rows", "r.jsonl", "--model", "openai/fake-judge",
                                      "--api-base", llama_cpp_python_like.url])
    J.build_judge(args, None)
    assert args.concurrency == 1
    assert len(args.judge_notes) == 1 and "llama-cpp-python" in args.judge_notes[0]
    assert "raise" not in args.judge_notes[0]
    more = build_parser().parse_args(["judge", "--rows", "r.jsonl", "--model", "openai/fake-judge",
                                      "--api-base", llama_cpp_python_like.url, "--concurrency", "4"])
    J.build_judge(more, None)
    assert more.concurrency == 4 and "more than the server's 1 parallel slot" in more.judge_notes[0]


def test_other_model_listings_are_not_taken_for_llama_cpp_python():
    from rcp_jax.judging.server_info import _is_llama_cpp_python

    assert not _is_llama_cpp_python({"data": [{"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 8192}]})
    assert not _is_llama_cpp_python({"data": [{"id": "m", "owned_by": "llamacpp"}]})  # llama.cpp's llama-server
    assert not _is_llama_cpp_python({"data": [{"id": "m", "owned_by": "me"}]})  # no permissions list
    assert not _is_llama_cpp_python({"data": []}) and not _is_llama_cpp_python(None)


# --------------------------------------------------------------------------------------------------
# fit's statistical model is --calibration-model (--model is the LLM in judge); --model is deprecated there
# --------------------------------------------------------------------------------------------------
def test_fit_names_its_model_option_calibration_model(judged, cli, tmp_path):
    _, store, _ = judged
    out = cli("fit", "--store", str(store), "--out", str(tmp_path / "a"), "--calibration-model", "rubric-only",
              "--no-plots", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["calibration_model"] == info["model"] == "rubric-only"
    assert "deprecated" not in out.stderr
    old = cli("fit", "--store", str(store), "--out", str(tmp_path / "b"), "--model", "rubric-only", "--no-plots",
              "--json")
    assert old.returncode == 0, old.stderr
    assert "warning: fit's --model is deprecated" in old.stderr and "--calibration-model" in old.stderr
    assert json.loads(old.stdout)["calibration_model"] == "rubric-only"
    assert any("deprecated" in n for n in json.loads(old.stdout)["notes"])
    refused = cli("fit", "--store", str(store), "--out", str(tmp_path / "c"), "--calibration-model", "joint")
    assert refused.returncode == 2 and "--calibration-model joint has no point fit" in refused.stderr
    from rcp_jax.cli import build_parser

    assert "not the LLM" in build_parser().verb_parsers["fit"].format_help()


# --------------------------------------------------------------------------------------------------
# one environment variable turns on every notebook's quick mode
# --------------------------------------------------------------------------------------------------
def test_every_notebook_reads_the_same_quick_mode_variable():
    import re

    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"RCP\w*NOTEBOOK\w*")
    seen: dict[str, set[str]] = {}
    for path in [*sorted((root / "notebooks").glob("*.ipynb")), *sorted((root / "tests").rglob("*.py")), root / "README.md"]:
        if path.name == Path(__file__).name:
            continue
        for name in pattern.findall(path.read_text(encoding="utf-8")):
            seen.setdefault(name, set()).add(str(path.relative_to(root)))
    assert set(seen) == {"RCP_JAX_NOTEBOOK_SMALL"}, seen
    notebooks = {p for p in seen["RCP_JAX_NOTEBOOK_SMALL"] if p.endswith(".ipynb")}
    assert notebooks == {str(p.relative_to(root)) for p in (root / "notebooks").glob("*.ipynb")}
    assert "README.md" in seen["RCP_JAX_NOTEBOOK_SMALL"]


# --------------------------------------------------------------------------------------------------
# two simulated judges from the CLI: "A second judge" offline
# --------------------------------------------------------------------------------------------------
def test_two_named_simulated_judges_pool_as_two_judges(demo_tiny, cli, tmp_path):
    store = tmp_path / "store"
    base = ["judge", "--rows", str(demo_tiny["rows"]), "--store", str(store), "--quiet", "--json"]
    first = cli(*base, "--simulated-name", "sim-a")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["model"] == "sim-a"
    second = cli(*base, "--simulated-name", "sim-strict", "--simulated-severity", "1.5", "--simulated-noise", "0.3")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["calls"] == json.loads(first.stdout)["calls"]  # a judge of its own: all asked
    fit = cli("fit", "--store", str(store), "--judges", "sim-a,sim-strict", "--out", str(tmp_path / "fit"), "--json")
    assert fit.returncode == 0, fit.stderr
    offsets = {r["judge"]: r["delta"] for r in json.loads((tmp_path / "fit" / "fit.json").read_text())["offsets"]}
    assert set(offsets) == {"sim-a", "sim-strict"}
    assert offsets["sim-strict"] > offsets["sim-a"]  # the stricter one is found stricter


def test_simulated_options_are_refused_with_a_real_model_and_checked():
    from rcp_jax.cli import _judge_options as J
    from rcp_jax.cli import build_parser
    from rcp_jax.errors import DataError

    def args(*extra):
        return build_parser().parse_args(["judge", "--rows", "r.jsonl", *extra])

    with pytest.raises(DataError, match=r"--simulated-severity set\(s\) the simulated judge, but --model is openai/x"):
        J.build_judge(args("--model", "openai/x", "--simulated-severity", "1"), None)
    with pytest.raises(DataError, match="--simulated-name 'two words'"):
        J.build_judge(args("--simulated-name", "two words"), {"q": {"d": 0.0}})
    judge = J.build_judge(args("--simulated-name", "lenient", "--simulated-severity", "-0.5",
                               "--simulated-discrimination", "2"), {"q": {"d": 0.0}})
    assert (judge.model, judge.severity, judge.discrimination, judge.noise) == ("lenient", -0.5, 2.0, 0.5)
    default = J.build_judge(args(), {"q": {"d": 0.0}})
    from rcp_jax.judging import SimulatedJudge

    # the default keeps the family (and so the record ids) of every store judged before these options
    assert default.family("rubric") == SimulatedJudge({"q": {"d": 0.0}}, seed=0).family("rubric")
    with pytest.raises(SystemExit):
        args("--simulated-discrimination", "0")


# --------------------------------------------------------------------------------------------------
# what extend costs (README, "Adding a new reranker later"): the table there, and one measured run
# --------------------------------------------------------------------------------------------------
def test_extension_cost_per_new_document_matches_the_readme():
    from rcp_jax.schedule import extension_counts

    table = {1: (12, 1), 2: (12, 2), 3: (12, 6), 5: (12, 7), 10: (24, 7), 30: (72, 20)}
    assert {n: extension_counts(n) for n in table} == table
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "| calls per new document | 13 | 7.0 | 6.0 | 3.8 | 3.1 | 3.07 |" in readme
    assert [round(sum(c) / n, 2) for n, c in table.items()] == [13.0, 7.0, 6.0, 3.8, 3.1, 3.07]
    from benchmarks.fixtures.extension_cost import measure  # the benchmark's own measurement, on a small collection

    got = measure(3, queries=2, pool=16, seed=1, malformed=0.0)
    assert (got["new_documents"], got["calls"], got["calls_per_new_document"]) == (6, 36, 6.0)


# --------------------------------------------------------------------------------------------------
# report figures: the leaderboard's axis names its k; query names in query_calibration.png do not overlap
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def drawn(monkeypatch):
    """The figures the report functions draw, kept open (their PNG is still written)."""
    import rcp_jax.plots.report as report

    figures = []
    real_save = report._save

    def keep(fig, path):
        figures.append(fig)
        fig.canvas.draw()
        from matplotlib.text import Text

        # the text's own box (an annotation's window extent would include its leader line)
        snapshot = [(t.get_text(), Text.get_window_extent(t)) for ax in fig.axes for t in ax.texts]
        fig.snapshot = snapshot
        return real_save(fig, path)

    monkeypatch.setattr(report, "_save", keep)
    return figures


def test_the_leaderboard_axis_names_the_cut_off_and_queries(drawn, tmp_path):
    from rcp_jax import evaluate, leaderboard
    from rcp_jax.plots.report import write_evaluation_plots

    run = pd.DataFrame([(s, f"q{q}", f"d{d}", float((d * (3 if s == "a" else 7)) % 5))
                        for s in ("a", "b") for q in range(4) for d in range(8)], columns=["system", "query_id", "doc_id", "score"])
    gains = pd.DataFrame([(f"q{q}", f"d{d}", d / 8) for q in range(4) for d in range(8)], columns=["query_id", "doc_id", "gain"])
    per_query = evaluate(run, gains=gains, k=5)
    assert per_query.attrs["k"] == 5
    write_evaluation_plots(per_query, leaderboard(per_query), tmp_path)
    assert drawn[0].axes[0].get_xlabel() == "mean nDCG@5 over 4 queries"
    write_evaluation_plots(per_query, leaderboard(per_query), tmp_path, k=3)  # an explicit k wins
    labels = [f.axes[0].get_xlabel() for f in drawn]
    assert [x for x in labels if x.startswith("mean")] == ["mean nDCG@5 over 4 queries", "mean nDCG@3 over 4 queries"]


@pytest.mark.parametrize("n", [8, 30])
def test_query_names_do_not_overlap(drawn, tmp_path, n):
    import types

    from rcp_jax.plots.report import query_calibration

    rng = np.random.default_rng(1)
    queries = pd.DataFrame({"query_id": [f"PLAIN-{1000 + 37 * i}" for i in range(n)],
                            "alpha": np.r_[rng.normal(-1.3, 0.15, n - 4), rng.normal(0, 0.5, 4)],
                            "tau": np.r_[rng.normal(0.65, 0.05, n - 4), rng.normal(0.8, 0.1, 4)]})
    path = query_calibration(types.SimpleNamespace(queries=queries), tmp_path / "query_calibration.png")
    assert path.is_file()
    texts = drawn[-1].snapshot
    names = [(t, box) for t, box in texts if t.startswith("PLAIN-")]
    for i, (a, box_a) in enumerate(names):
        for b, box_b in names[i + 1:]:
            assert not box_a.overlaps(box_b), (a, b)
    left_out = [t for t, _ in texts if t.startswith("not named")]
    named = {t for t, _ in names}
    listed = set(left_out[0].split(": ", 1)[1].replace(" and ", ", ").split(", ")) if left_out else set()
    assert named | {x for x in listed if x.startswith("PLAIN-")} == set(queries["query_id"])  # every query accounted for
    assert len(named) >= n - 4


def test_the_demo_says_what_its_three_metrics_are():
    from rcp_jax.cli._common import metric_legend

    board = pd.DataFrame({"qrel_ndcg": [0.5], "count_ndcg": [0.6], "rcp_ndcg": [0.7]}, index=["s"])
    legend = metric_legend(board, 10).splitlines()
    assert legend[0] == "nDCG@10, mean over queries; each metric's gain:"
    assert [line.split(":")[0].strip() for line in legend[1:]] == ["qrel-nDCG", "Count-nDCG", "RCP-nDCG"]
    assert len(metric_legend(board[["rcp_ndcg"]], 5).splitlines()) == 2
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "\n".join(legend) in readme  # the README's demo block shows it as the demo prints it
