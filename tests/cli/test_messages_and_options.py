"""What the CLI prints and refuses: judge's window counts and token summary, a quiet stop when stdout closes
early, the closest option to a mistyped one, ``load_calibration`` on the folder ``fit --out`` wrote,
``--concurrency auto`` on llama-cpp-python, fit's ``--calibration-model``, and the simulated judge's options."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from rcp_jax import schedule as S
from rcp_jax.cli import main


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
        assert main(["fit", "--store", str(store), "--out", str(folder / "fit"), "--method", "map", "--no-plots", "--json"]) == 0
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
    from benchmarks.fixtures.fake_server import FakeOpenAIServer
    from rcp_jax.judging import SimulatedJudge

    server = FakeOpenAIServer(SimulatedJudge({"q": {"d": 0.0}}), model_info={"owned_by": "me", "permissions": []}).start()
    yield server
    server.stop()


def test_llama_cpp_python_is_one_slot(llama_cpp_python_like):
    from rcp_jax.judging.transport.server_info import probe_server

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
    from rcp_jax.judging.transport.server_info import _is_llama_cpp_python

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
              "--method", "map", "--no-plots", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["calibration_model"] == info["model"] == "rubric-only"
    assert "deprecated" not in out.stderr
    old = cli("fit", "--store", str(store), "--out", str(tmp_path / "b"), "--model", "rubric-only", "--no-plots",
              "--method", "map", "--json")
    assert old.returncode == 0, old.stderr
    assert "warning: fit's --model is deprecated" in old.stderr and "--calibration-model" in old.stderr
    assert json.loads(old.stdout)["calibration_model"] == "rubric-only"
    assert any("deprecated" in n for n in json.loads(old.stdout)["notes"])
    refused = cli("fit", "--store", str(store), "--out", str(tmp_path / "c"), "--calibration-model", "joint",
                  "--method", "map")
    assert refused.returncode == 2 and "--calibration-model joint has no point fit" in refused.stderr
    assert "leave --method out" in refused.stderr  # the default, auto, samples the joint model
    from rcp_jax.cli import build_parser

    assert "not the LLM" in build_parser().verb_parsers["fit"].format_help()


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
    pooled = json.loads(fit.stdout)  # fit's default, auto, pools judges by the MAP (its intervals from the Hessian)
    assert pooled["method"] == "map" and pooled["auto"].startswith("map: several judges pooled")
    assert not (tmp_path / "fit" / "posterior").exists()
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
