"""Page images in windows: content parts in order, labels, limits, and the window identity."""

from __future__ import annotations

import base64
import io
import math
import shutil

import pytest
from PIL import Image

from rcp_jax.judging import SimulatedJudge, Window, record_id
from rcp_jax.judging.lookup import PerQuery
from rcp_jax.judging.prompts.pages import Document, ImageLimits, ImageError, PageImage, encode_image, stamp_images
from rcp_jax.judging.prompts.render import IMAGE_LABEL, builtin_template, render_window


def _png(path, size, colour=(250, 250, 240)):
    img = Image.new("RGB", size, colour)
    for x in range(0, size[0], 7):  # some detail, so PNG does not compress it to nothing
        for y in range(0, size[1], 5):
            img.putpixel((x, y), ((x * 13) % 256, (y * 7) % 256, (x * y) % 256))
    img.save(path, format="PNG")
    return path


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    d = tmp_path_factory.mktemp("imgs")
    return {"small": _png(d / "small.png", (120, 160)), "big": _png(d / "big.png", (1600, 2100)),
            "other": _png(d / "other.png", (120, 160), colour=(10, 20, 30)), "folder": d}


def _decoded(url):
    assert url.startswith("data:image/")
    data = base64.b64decode(url.partition(",")[2])
    return data, Image.open(io.BytesIO(data)).size


def test_images_sit_in_their_doc_blocks_in_window_order_each_after_its_label(images):
    docs = [Document("page one text", PageImage(images["small"])), "a text document",
            Document("", PageImage(images["big"])), Document("text of four", PageImage(images["other"]))]
    limits = ImageLimits(max_side=256, max_bytes=40_000, max_images=2)
    r = render_window(builtin_template("tournament"), "q?", ["a", "b", "c", "d"], docs, image_limits=limits)
    parts = r.messages[0]["content"]
    assert isinstance(parts, list) and {p["type"] for p in parts} == {"text", "image_url"}
    shown = [i for i, p in enumerate(parts) if p["type"] == "image_url"]
    assert len(shown) == 2 == len(r.images)  # the count limit: the third image is left out
    assert r.images == ("doc_1", "doc_3") and r.omitted_images == ("d",)
    for i, pid in zip(shown, r.images, strict=True):  # a text part ending in the image's label just before it
        assert parts[i - 1]["type"] == "text" and parts[i - 1]["text"].endswith(IMAGE_LABEL.format(pid=pid))
    for i in shown:  # within the size limits
        data, (w, h) = _decoded(parts[i]["image_url"]["url"])
        assert max(w, h) <= 256 and len(data) <= 40_000
    text = r.text
    assert text.index('<doc id="doc_1">') < text.index("[page image of doc_1]") < text.index("page one text")
    assert "a text document" in text and "[page image of doc_2]" not in text  # a text document has no image
    assert "[page image of doc_4] not shown" not in text and "page image of doc_4 not shown" in text
    assert "text of four" in text  # an omitted image's document keeps its text


def test_small_image_is_sent_byte_for_byte_big_one_scaled_and_cached(images):
    raw = images["small"].read_bytes()
    sent = encode_image(PageImage(images["small"]))
    assert _decoded(sent.url)[0] == raw and not sent.resized
    limits = ImageLimits(max_side=300, max_bytes=30_000)
    big = encode_image(PageImage(images["big"]), limits)
    data, (w, h) = _decoded(big.url)
    assert big.resized and max(w, h) <= 300 and len(data) <= 30_000
    assert abs(w / h - 1600 / 2100) < 0.02  # the page keeps its shape
    assert encode_image(PageImage(images["big"]), limits) is big  # cached by (bytes, limits)


def test_a_text_window_keeps_its_record_id_and_form():
    w = Window("q1", "tournament", "round1", 0, ("a", "b"))
    family = SimulatedJudge({"q1": {"a": 0.0, "b": 1.0}}).family("tournament")
    [same] = stamp_images([w], PerQuery({"a": "text", "b": "more"}))
    assert same is w and "images" not in same.to_dict()
    assert record_id(family, same) == record_id(family, Window("q1", "tournament", "round1", 0, ("a", "b")))


def test_the_window_identity_follows_image_bytes_not_paths(images, tmp_path):
    w = Window("q1", "tournament", "round1", 0, ("a", "b"))
    family = SimulatedJudge({"q1": {"a": 0.0, "b": 1.0}}).family("tournament")

    def rid(path, limits=None):
        docs = PerQuery({"a": Document("x", PageImage(path)), "b": "text"})
        [stamped] = stamp_images([w], docs, limits)
        assert stamped == w  # the same window for the schedule; only its record id differs
        return record_id(family, stamped)

    moved = shutil.copy(images["small"], tmp_path / "renamed.png")
    assert rid(images["small"]) == rid(moved) != record_id(family, w)  # moved file: same window
    changed = _png(tmp_path / "changed.png", (120, 160), colour=(0, 0, 0))
    assert rid(changed) != rid(images["small"])  # changed image: a new window
    assert rid(images["small"], ImageLimits(max_side=64)) != rid(images["small"])  # other limits: other pixels
    [stamped] = stamp_images([w], PerQuery({"a": Document("x", PageImage(moved)), "b": "t"}))
    assert Window.from_dict(stamped.to_dict()).images == stamped.images  # stored and read back


def test_bad_image_names_the_document_and_file(tmp_path):
    bad = tmp_path / "page.png"
    bad.write_bytes(b"not an image at all")
    with pytest.raises(ImageError, match=r"document 'a'.*page\.png.*PNG or JPEG"):
        render_window(builtin_template("tournament"), "q", ["a", "b"], [Document("", PageImage(bad)), "t"])
    gif = tmp_path / "anim.gif"
    Image.new("RGB", (10, 10)).save(gif, format="GIF")
    with pytest.raises(ImageError, match="GIF, not PNG or JPEG"):
        encode_image(PageImage(gif), doc_id="z")
    with pytest.raises(ImageError, match="cannot be read"):
        PageImage(tmp_path / "missing.png").read()


def test_image_tokens_follow_litellm_rules_where_known_else_the_documented_patches(images):
    from rcp_jax.judging import LiteLLMJudge

    limits = ImageLimits(max_side=1024)
    r = render_window(builtin_template("tournament"), "q", ["a", "b"],
                      [Document("", PageImage(images["big"])), "some text"], image_limits=limits)
    url = next(p["image_url"]["url"] for p in r.messages[0]["content"] if p["type"] == "image_url")
    w, h = _decoded(url)[1]
    # OpenAI's published tile rule, by hand: fit in 2048 x 2048, shortest side to 768, 512-pixel tiles
    s = min(1.0, 2048 / max(w, h), 768 / min(w, h))
    tiles = math.ceil(math.floor(w * s) / 512) * math.ceil(math.floor(h * s) / 512)
    text_only = [{"role": "user", "content": r.text}]
    for model, base, per_tile in (("openai/gpt-4o-mini", 2833, 5667), ("openai/gpt-4o", 85, 170)):
        judge = LiteLLMJudge(model)
        total, method = judge.count_tokens(r.messages)
        assert "litellm's image rule" in method
        assert total - judge.count_tokens(text_only)[0] == base + per_tile * tiles
    judge = LiteLLMJudge("hosted_vllm/qwen2.5-vl")  # no litellm image rule: the documented approximation
    total, method = judge.count_tokens(r.messages)
    assert "approximation" in method
    assert total - judge.count_tokens(text_only)[0] == math.ceil(w / 28) * math.ceil(h / 28)


def test_the_cli_image_defaults_are_the_library_defaults():
    from rcp_jax.cli import _image_options as opts
    from rcp_jax.judging.prompts import pages

    assert (opts.DEFAULT_MAX_SIDE, opts.DEFAULT_MAX_BYTES, opts.DEFAULT_MAX_IMAGES) == (
        pages.DEFAULT_MAX_SIDE, pages.DEFAULT_MAX_BYTES, pages.DEFAULT_MAX_IMAGES)
    assert opts.image_limits(object()) == ImageLimits()
