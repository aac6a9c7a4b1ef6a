"""What is checked about page images before any judge call: no document goes unshown (page-only documents get the
image slots first; a window with more of them than slots is refused, so no stored answer is about a document the
judge never saw), image files must lie inside the dataset's folder, and every pooled image decodes (a damaged PNG
or a ``data:text/plain`` URL is refused naming the corpus line and the document) before the first call."""

from __future__ import annotations

import base64
import json
import os
import warnings
from argparse import Namespace

import pytest
from PIL import Image

from benchmarks.fixtures.fake_server import FakeOpenAIServer
from rcp_jax.cli._common import load_collection
from rcp_jax.data import read_beir
from rcp_jax.errors import DataError
from rcp_jax.judging import JudgeInputError, LiteLLMJudge, SimulatedJudge, Window, judge_windows_sync
from rcp_jax.judging.prompts.pages import Document, ImageError, ImageLimits, PageImage
from rcp_jax.judging.prompts.render import IMAGE_LABEL, builtin_template, read_rendered, render_window

MODEL = "openai/fake-judge"


def _png(path, colour=(250, 250, 240), size=(60, 80)):
    img = Image.new("RGB", size, colour)
    for x in range(0, size[0], 5):
        img.putpixel((x, x % size[1]), (x * 3 % 256, 20, 40))
    img.save(path, format="PNG")
    return path



def page_dataset(folder, images: dict[str, str], *, texts: dict[str, str] | None = None, n_docs: int = 4):
    """A BEIR folder with one query and documents d0..d{n-1}; ``images`` gives a document's ``image`` field (the
    others are text). Returns (folder, pools file)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    rows = []
    for k in range(n_docs):
        d = f"d{k}"
        row = {"_id": d, "text": (texts or {}).get(d, "" if d in images else f"plain text document {k}")}
        if d in images:
            row["image"] = images[d]
        rows.append(json.dumps(row))
    (folder / "corpus.jsonl").write_text("\n".join(rows) + "\n")
    (folder / "queries.jsonl").write_text('{"_id": "q", "text": "which page?"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\td0\t1\n")
    pools = folder.parent / f"{folder.name}.pools.tsv"
    pools.write_text("query_id\tdoc_id\trank\n" + "".join(f"q\td{k}\t{k + 1}\n" for k in range(n_docs)))
    return folder, pools


@pytest.fixture
def idle_server():
    """A fake server that must never be called (its chat requests are checked to be none)."""
    with FakeOpenAIServer(SimulatedJudge({"q": {}}), queries={}, documents={}) as server:
        yield server


def judge_cli(cli, folder, pools, server, tmp_path, *extra):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cli("judge", "--dataset", str(folder), "--pools", str(pools), "--model", MODEL, "--api-base",
                   server.url, "--store", str(tmp_path / "store"), "--quiet", *extra)


# -- 1. no document goes unshown --------------------------------------------------------------------------------------

def test_page_only_documents_get_the_image_slots_first(tmp_path):
    a, b, c, d = (_png(tmp_path / f"{n}.png", colour=(10 * i, 30, 60)) for i, n in enumerate("abcd"))
    values = [Document("text of a", PageImage(a)), Document("text of b", PageImage(b)), Document("", PageImage(c)),
              Document("", PageImage(d))]
    r = render_window(builtin_template("tournament"), "q", ["a", "b", "c", "d"], values,
                      image_limits=ImageLimits(max_images=2))
    assert r.images == ("doc_3", "doc_4") and r.omitted_images == ("a", "b")  # the pages alone took the slots
    _, blocks = read_rendered(r.text)
    for pid, body in blocks:  # every document is shown: by its image, or by its text
        assert body.startswith(IMAGE_LABEL.format(pid=pid)) or body.split("\n", 1)[1].startswith("text of")


def test_a_window_with_more_page_only_documents_than_slots_is_never_rendered(tmp_path):
    pages = [Document("", PageImage(_png(tmp_path / f"p{k}.png", colour=(k * 40, 0, 0)))) for k in range(3)]
    with pytest.raises(ImageError, match=r"3 page images without text but shows at most 2 images: c would not"):
        render_window(builtin_template("tournament"), "q", ["a", "b", "c"], pages,
                      image_limits=ImageLimits(max_images=2))


def test_no_answer_is_stored_for_a_window_that_would_hide_a_page(tmp_path):
    """judge_windows refuses, before any call, a window whose page-only documents exceed the image limit: nothing is
    asked and nothing stored, for that window or any other of the run."""
    docs = {f"p{k}": Document("", PageImage(_png(tmp_path / f"p{k}.png", colour=(k * 40, 9, 9)))) for k in range(3)}
    docs["t"] = "a text document"
    latent = {"q": {d: float(k) for k, d in enumerate(docs)}}
    fits = Window("q", "tournament", "round1", 0, ("p0", "t"))
    hides = Window("q", "tournament", "round1", 1, ("p0", "p1", "p2", "t"))
    with FakeOpenAIServer(SimulatedJudge(latent), queries={"q": "q?"}, documents={"q": docs}) as server:
        judge = LiteLLMJudge(MODEL, api_base=server.url, api_key="sk-x", structured_output="none")
        judge.image_limits = ImageLimits(max_images=2)
        with pytest.raises(JudgeInputError, match=r"window q/tournament/round1#1: 3 of its documents are page images "
                                                  r"without text.*1 would not be shown at all"):
            judge_windows_sync([fits, hides], judge=judge, store=tmp_path / "store", documents={"q": docs},
                               queries={"q": "q?"})
        assert server.requests == []
    assert not any(p.stat().st_size for p in (tmp_path / "store").rglob("*.jsonl"))


def test_every_document_of_every_request_is_shown_and_every_stored_answer_is_about_shown_ones(page_corpus, tmp_path):
    """A page corpus judged over HTTP with 2 image slots per window (each window: 2 page-only documents, 2 with page and
    text, 2 text-only): in every request each document block shows an image or text, so each stored score is about a
    document the judge was shown."""
    folder, info = page_corpus
    col = read_beir(folder)
    documents = {d: Document(x, PageImage(i) if i else None)
                 for d, x, i in col.corpus[["doc_id", "text", "image"]].itertuples(index=False)}
    queries = dict(zip(col.queries["query_id"], col.queries["text"]))
    limits = ImageLimits(max_images=2)
    windows = []
    for q in queries:
        ids = sorted(d for d in documents if d.startswith(f"{q}-"))
        windows += [Window(q, "tournament", "round1", 0, tuple(ids)),
                    Window(q, "rubric", "balanced", 0, tuple(ids[::-1]))]
    latent = {q: {d: 0.0 for d in documents if d.startswith(f"{q}-")} for q in queries}
    with FakeOpenAIServer(SimulatedJudge(latent), queries=queries, documents=documents, image_limits=limits) as server:
        judge = LiteLLMJudge(MODEL, api_base=server.url, api_key="sk-x", structured_output="none")
        judge.image_limits = limits
        got = judge_windows_sync(windows, judge=judge, store=tmp_path / "store", documents=documents, queries=queries)
        requests = [r for r in server.requests if r.get("status") == 200]
    assert len(got) == len(windows) and all(j.valid for j in got)
    assert len(requests) == len(windows)
    for req in requests:
        text = "".join(p["text"] for p in req["messages"][0]["content"] if p["type"] == "text")
        labels = {im["label"] for im in req["images"]}
        _, blocks = read_rendered(text)
        assert len(blocks) == 6 and len(labels) == 2
        for pid, body in blocks:
            note = f"[page image of {pid} not shown"
            shown_text = body.split("\n", 1)[1] if body.startswith(note) else body
            assert IMAGE_LABEL.format(pid=pid) in labels or shown_text.strip(), (pid, body)
    for j in got:  # the premise: each window holds 2 page-only documents, as many as its image slots
        kinds = [info["kinds"][d] for d in j.window.doc_ids]
        assert sorted(kinds).count("image") == 2


def test_the_cli_refuses_an_image_limit_below_the_page_only_documents_of_a_window(tmp_path, cli, idle_server):
    pages = {f"d{k}": f"p{k}.png" for k in range(3)}
    folder, pools = page_dataset(tmp_path / "ds", pages)
    for k in range(3):
        _png(folder / f"p{k}.png", colour=(k * 50, 10, 10))
    out = judge_cli(cli, folder, pools, idle_server, tmp_path, "--images-per-window", "2")
    assert out.returncode == 2, out.stderr
    assert "query 'q': its pool holds 3 page-only documents" in out.stderr
    assert "--images-per-window 3 or more" in out.stderr and "Traceback" not in out.stderr
    assert idle_server.requests == []


# -- 2. image files stay inside the dataset ---------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["relative", "absolute", "symlink"])
def test_an_image_outside_the_dataset_is_refused_before_any_call(tmp_path, cli, idle_server, where):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = _png(outside / "secret.png", colour=(1, 2, 3))
    folder = tmp_path / "ds"
    folder.mkdir()
    if where == "symlink":
        os.symlink(secret, folder / "innocent.png")
    value = {"relative": "../outside/secret.png", "absolute": str(secret), "symlink": "innocent.png"}[where]
    _png(folder / "fine.png")
    folder, pools = page_dataset(folder, {"d0": "fine.png", "d2": value})
    out = judge_cli(cli, folder, pools, idle_server, tmp_path)
    assert out.returncode == 2, out.stderr
    err = out.stderr
    assert f"{folder / 'corpus.jsonl'}:3: document 'd2': image file {secret.resolve()} lies outside" in err, err
    assert "--allow-outside-images" in err and "Traceback" not in err
    assert idle_server.requests == []


def test_an_outside_image_is_read_only_with_the_opt_in(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    _png(outside / "secret.png")
    folder, pools = page_dataset(tmp_path / "ds", {"d1": "../outside/secret.png"})
    args = Namespace(dataset=folder, rows=None, split="test", images=None, qrels=None, pools=pools, queries=None,
                     max_queries=None, missing_text="error", allow_outside_images=False)
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: document 'd1'.*lies outside"):
        load_collection(args)
    args.allow_outside_images = True
    col, _ = load_collection(args)
    assert col.corpus.set_index("doc_id").loc["d1", "image"] == str((outside / "secret.png").resolve())
    images = tmp_path / "pages"  # the --images folder is inside too
    images.mkdir()
    _png(images / "d3.png")
    args.allow_outside_images, args.images = False, images
    folder2, args.pools = page_dataset(tmp_path / "ds2", {})
    args.dataset = folder2
    col, _ = load_collection(args)
    assert col.corpus.set_index("doc_id").loc["d3", "image"] == str((images / "d3.png").resolve())


# -- 3. every image checked before the first call ---------------------------------------------------------------------

def test_a_damaged_png_among_many_is_refused_before_any_call(tmp_path, cli, idle_server):
    folder = tmp_path / "ds"
    folder.mkdir()
    n = 41
    images = {f"d{k}": f"p{k}.png" for k in range(n)}
    for k in range(n - 1):
        _png(folder / f"p{k}.png", colour=(k * 6 % 256, 0, 0))
    good = (folder / "p0.png").read_bytes()
    (folder / f"p{n - 1}.png").write_bytes(good[: len(good) // 2])  # a PNG cut in half
    texts = {d: f"extracted text {d}" for d in images}
    folder, pools = page_dataset(folder, images, texts=texts, n_docs=n)
    out = judge_cli(cli, folder, pools, idle_server, tmp_path)
    assert out.returncode == 2, out.stderr
    assert f"corpus.jsonl:{n}: document 'd{n - 1}': image {folder / f'p{n - 1}.png'}" in out.stderr, out.stderr
    assert "cannot be read as an image" in out.stderr and "Traceback" not in out.stderr
    assert idle_server.requests == []


def test_a_data_url_of_another_media_type_names_the_document_and_line(tmp_path, cli, idle_server):
    url = "data:text/plain;base64," + base64.b64encode(b"not a page at all").decode()
    folder, pools = page_dataset(tmp_path / "ds", {"d1": url}, texts={"d1": "with text"})
    out = judge_cli(cli, folder, pools, idle_server, tmp_path)
    assert out.returncode == 2, out.stderr
    assert "corpus.jsonl:2: document 'd1': image data URL data:text/plain" in out.stderr, out.stderr
    assert "its media type is 'text/plain', not a PNG or JPEG image" in out.stderr
    assert idle_server.requests == []
    est = judge_cli(cli, folder, pools, idle_server, tmp_path, "--estimate")  # the estimate checks the same
    assert est.returncode == 2 and "document 'd1'" in est.stderr


def test_the_library_checks_every_image_of_the_windows_before_the_first_call(tmp_path):
    docs = {"a": Document("", PageImage(_png(tmp_path / "a.png"))), "b": "text",
            "c": Document("t", PageImage("data:text/plain;base64,aGVsbG8="))}
    windows = [Window("q", "tournament", "round1", 0, ("a", "b")), Window("q", "tournament", "round1", 1, ("b", "c"))]
    with FakeOpenAIServer(SimulatedJudge({"q": {"a": 0, "b": 1, "c": 2}}), queries={"q": "q?"},
                          documents={"q": docs}) as server:
        judge = LiteLLMJudge(MODEL, api_base=server.url, api_key="sk-x", structured_output="none")
        with pytest.raises(ImageError, match=r"document 'c': image data URL data:text/plain.*media type"):
            judge_windows_sync(windows, judge=judge, store=tmp_path / "store", documents={"q": docs},
                               queries={"q": "q?"}, concurrency=1)
        assert server.requests == []
