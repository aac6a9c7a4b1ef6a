"""Page-image corpora end to end: readers, the fake server seeing the image parts, the CLI flow."""

from __future__ import annotations

import json
import warnings

import pytest
from PIL import Image

from benchmarks.fixtures.fake_server import FakeOpenAIServer
from rcp_jax.data import read_beir
from rcp_jax.data.collection import attach_images
from rcp_jax.errors import DataError
from rcp_jax.judging import LiteLLMJudge, SimulatedJudge, Window, judge_windows_sync
from rcp_jax.judging.prompts.pages import Document, ImageLimits, PageImage



def test_readers_take_an_image_field_or_a_folder_named_by_doc_id(page_corpus, tmp_path):
    folder, info = page_corpus
    col = read_beir(folder)  # image-only documents are not "missing text"
    with_image = dict(zip(col.corpus["doc_id"], col.corpus["image"]))
    for did, kind in info["kinds"].items():
        assert bool(with_image[did]) == (kind != "text")
        if kind != "text":
            assert with_image[did] == str((info["pages"] / f"{did}.png").resolve())  # relative to the corpus file
    # a corpus without the field, pages attached from a folder
    plain = tmp_path / "plain"
    plain.mkdir()
    lines = [json.loads(x) for x in (folder / "corpus.jsonl").read_text().splitlines()]
    (plain / "corpus.jsonl").write_text("".join(json.dumps({"_id": r["_id"], "text": r["text"] or "x"}) + "\n"
                                                for r in lines))
    corpus = read_beir(folder).corpus.drop(columns="image")
    attached = attach_images(corpus, info["pages"])
    assert dict(zip(attached["doc_id"], attached["image"])) == with_image
    Image.new("RGB", (8, 8)).save(info["pages"].parent / "stray.png")
    stray = tmp_path / "stray"
    stray.mkdir()
    Image.new("RGB", (8, 8)).save(stray / "nobody.png")
    with pytest.raises(DataError, match="none of its 1 images is named by a document id"):
        attach_images(corpus, stray)
    Image.new("RGB", (8, 8)).save(stray / "q0-d0.png")
    with pytest.warns(UserWarning, match="1 image\\(s\\) named by no document.*nobody"):
        attach_images(corpus, stray)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "corpus.jsonl").write_text('{"_id": "a", "text": "t"}\n{"_id": "b", "image": "gone.png"}\n')
    (bad / "queries.jsonl").write_text('{"_id": "q", "text": "t"}\n')
    (bad / "qrels").mkdir()
    (bad / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\ta\t1\n")
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: image file 'gone\.png' not found"):
        read_beir(bad)


def test_the_fake_server_gets_each_image_after_its_label_in_order_and_within_limits(page_corpus):
    folder, info = page_corpus
    col = read_beir(folder)
    documents = {d: Document(f"{t}. {x}".strip(". "), PageImage(i) if i else None)
                 for d, t, x, i in col.corpus[["doc_id", "title", "text", "image"]].itertuples(index=False)}
    queries = dict(zip(col.queries["query_id"], col.queries["text"]))
    ids = sorted(d for d in documents if d.startswith("q0-"))
    latent = {"q0": {d: float(5 - 2 * k) for k, d in enumerate(ids)}}
    limits = ImageLimits(max_side=64, max_bytes=4096, max_images=4)
    windows = [Window("q0", "tournament", "round1", 0, tuple(ids)), Window("q0", "rubric", "balanced", 0, tuple(ids[::-1]))]
    with FakeOpenAIServer(SimulatedJudge(latent, seed=3), queries=queries, documents=documents,
                          image_limits=limits) as server:
        judge = LiteLLMJudge("openai/fake-judge", api_base=server.url, api_key="sk-page-test", structured_output="none")
        judge.image_limits = limits
        got = judge_windows_sync(windows, judge=judge, store=folder / "fake_store", documents=documents,
                                 queries=queries, concurrency=1)
        requests = sorted((r for r in server.requests if r.get("status") == 200), key=lambda r: r["index"])
    assert len(got) == 2 and all(j.valid for j in got)
    for window, req in zip(windows, requests, strict=True):
        with_image = [f"doc_{k + 1}" for k, d in enumerate(window.doc_ids) if info["kinds"][d] != "text"]
        assert [im["label"] for im in req["images"]] == [f"[page image of {p}]" for p in with_image]
        assert 0 < len(req["images"]) <= 4
        for im in req["images"]:
            assert im["media_type"] in ("image/png", "image/jpeg") and im["bytes"] <= 4096
            assert max(im["size"]) <= 64
    # the server told the documents apart by their image bytes: the answers follow the latent order
    scores = got[0].scores
    assert [d for d in sorted(scores, key=scores.get, reverse=True)] == ids
    assert all(j.window.images for j in got)  # stored with their image hash


def test_pool_judge_fit_evaluate_on_a_page_corpus(page_corpus, tmp_path, cli):
    folder, info = page_corpus
    w = tmp_path
    out = cli("pool", "--dataset", str(folder), "--depth", "6", "--out", str(w / "pools.tsv"), "--json")
    assert out.returncode == 0, out.stderr
    pooled = json.loads(out.stdout)
    assert pooled["image_only_documents"] == sum(k == "image" for k in info["kinds"].values())
    assert pooled["pooled_with_image"] > 0
    plan = cli("judge", "--dataset", str(folder), "--pools", str(w / "pools.tsv"), "--estimate", "--json")
    assert plan.returncode == 0, plan.stderr
    plan = json.loads(plan.stdout)
    assert "images ~ 28x28-pixel patches (approximation)" in plan["token_method"]
    assert any("page images per window" in n for n in plan["notes"])
    judged = cli("judge", "--dataset", str(folder), "--pools", str(w / "pools.tsv"), "--store", str(w / "store"),
                 "--json", "--quiet")
    assert judged.returncode == 0, judged.stderr
    first = json.loads(judged.stdout)["calls"]
    records = [json.loads(x) for x in (w / "store" / "tournament.jsonl").read_text().splitlines()]
    assert any("images" in r["window"] for r in records)
    again = cli("judge", "--dataset", str(folder), "--pools", str(w / "pools.tsv"), "--store", str(w / "store"),
                "--json", "--quiet")
    assert again.returncode == 0 and json.loads(again.stdout)["calls"] == 0 < first  # resumes from the store
    smaller = cli("judge", "--dataset", str(folder), "--pools", str(w / "pools.tsv"), "--store", str(w / "store"),
                  "--image-max-side", "32", "--estimate", "--json")
    assert smaller.returncode == 0 and json.loads(smaller.stdout)["input_tokens"] < plan["input_tokens"]
    fit = cli("fit", "--store", str(w / "store"), "--out", str(w / "fit"), "--method", "map", "--no-plots", "--json")
    assert fit.returncode == 0, fit.stderr
    ev = cli("evaluate", "--calibration", str(w / "fit"), "--runs", str(w / "pools.fusion.trec"),
             "--pools", str(w / "pools.tsv"), "--qrels", str(folder / "qrels" / "test.tsv"), "--out", str(w / "eval"),
             "--no-plots", "--json")
    assert ev.returncode == 0, ev.stderr
    board = json.loads(ev.stdout)
    assert board  # every system scored


def test_doctor_on_a_page_corpus(page_corpus, tmp_path, cli):
    # doctor once crashed here (TypeError: argument of type 'Document' is not iterable) where judge,
    # --estimate and fit worked
    folder, info = page_corpus
    pools = tmp_path / "pools.tsv"
    assert cli("pool", "--dataset", str(folder), "--depth", "6", "--out", str(pools)).returncode == 0
    out = cli("doctor", "--dataset", str(folder), "--pools", str(pools), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] and report["collection"] == "dataset"
    shown = {d for w in report["windows"] for d in w["doc_ids"]}
    assert {info["kinds"][d] for d in shown} == {"both", "image", "text"}  # page-only documents were asked
    assert all(w["valid"] and w["prompt_chars"] > 0 for w in report["windows"])


def test_a_bad_page_image_is_exit_2_naming_document_and_file(page_corpus, tmp_path, cli):
    folder, _ = page_corpus
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "q0-d0.png").write_bytes(b"GIF89a broken")
    pools = tmp_path / "pools.tsv"
    pools.write_text("query_id\tdoc_id\trank\nq0\tq0-d0\t1\nq0\tq0-d3\t2\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cli("judge", "--dataset", str(folder), "--pools", str(pools), "--images", str(pages),
                  "--store", str(tmp_path / "s"), "--quiet")
    assert out.returncode == 2, out.stderr
    assert "q0-d0" in out.stderr and "q0-d0.png" in out.stderr and "PNG or JPEG" in out.stderr
    assert "Traceback" not in out.stderr
