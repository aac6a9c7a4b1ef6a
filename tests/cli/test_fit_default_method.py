"""`rcp-jax fit` without --method runs auto: the MAP calibration plus a posterior, and one line saying which
method auto chose and why; `--method map` is the point fit alone (a three-query cut of the demo, in process)."""

from __future__ import annotations

import json

import pytest

from rcp_jax.cli import build_parser, main


@pytest.fixture(scope="module")
def tiny_store(demo_tiny, tmp_path_factory):
    """The judgement store of the three-query, 24-document cut of the demo."""
    folder = tmp_path_factory.mktemp("fit_default")
    assert main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(folder / "store"), "--quiet"]) == 0
    return folder / "store"


def test_the_default_method_is_auto():
    args = build_parser().parse_args(["fit", "--store", "s", "--out", "o"])
    assert args.method == "auto"


def test_fit_without_method_writes_a_posterior_and_says_what_auto_chose(tiny_store, tmp_path, capsys):
    out = tmp_path / "fit"
    capsys.readouterr()
    # fewer NUTS draws on one chain: the 4-chain defaults are checked in tests/bayes
    assert main(["fit", "--store", str(tiny_store), "--out", str(out), "--warmup", "50", "--draws", "50",
                 "--chains", "1", "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert (out / "calibration" / "items.json").is_file() and (out / "posterior" / "draws.npz").is_file()
    chose = [line for line in text.splitlines() if line.startswith("method auto chose")]
    assert chose == ["method auto chose nuts: 24 documents, within the 2,000 that NUTS samples in minutes "
                     "(--method map: the point fit only, no posterior)"], text
    assert text.splitlines()[1] == chose[0]  # right under the first line
    fitted = json.loads((out / "fit.json").read_text())
    assert fitted["method"] == "auto" and fitted["posterior_method"] == "nuts" and fitted["calibration_model"] == "joint"
    assert fitted["auto"].startswith("nuts: 24 documents")


def test_method_map_writes_no_posterior(tiny_store, tmp_path, capsys):
    out = tmp_path / "fit"
    capsys.readouterr()
    assert main(["fit", "--store", str(tiny_store), "--out", str(out), "--method", "map", "--no-plots", "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert (out / "calibration" / "items.json").is_file() and not (out / "posterior").exists()
    assert fitted["method"] == "map" and fitted["calibration_model"] == "frozen"
    assert "auto" not in fitted and "posterior" not in fitted


def test_method_map_removes_an_earlier_posterior_it_would_contradict(tiny_store, tmp_path, capsys):
    # evaluate --posterior and export read posterior/: a MAP refit into the same folder must not leave the earlier
    # fit's posterior beside a calibration it does not match
    out = tmp_path / "fit"
    assert main(["fit", "--store", str(tiny_store), "--out", str(out), "--warmup", "20", "--draws", "20",
                 "--chains", "1", "--no-plots"]) == 0
    assert (out / "posterior" / "posterior.json").is_file()
    (out / "posterior" / "my_notes.txt").write_text("mine")  # not ours: kept
    capsys.readouterr()
    assert main(["fit", "--store", str(tiny_store), "--out", str(out), "--method", "map", "--no-plots", "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert not (out / "posterior" / "posterior.json").exists() and not (out / "posterior" / "draws.npz").exists()
    assert (out / "posterior" / "my_notes.txt").read_text() == "mine"
    assert any("removed the posterior of an earlier fit" in note for note in fitted["notes"]), fitted["notes"]
