"""A tiny BEIR-style corpus of page images drawn at test time (text rendered to PNG with matplotlib).

Also used by ``benchmarks/page_images.py`` (the estimate of a 10-query image corpus).

Layout written under ``folder``::

    corpus.jsonl        _id, title, text[, image]   (image: "pages/<id>.png", relative to the corpus file)
    queries.jsonl       _id, text
    qrels/test.tsv      query-id, corpus-id, score
    pages/<id>.png      one page per document: its title and text drawn as a page

Documents cycle through three kinds so every path runs: ``"both"`` (page image + extracted text),
``"image"`` (page image only, empty text) and ``"text"`` (text only, no image).
"""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

TOPICS = ("glacier melt", "solar panels", "bread yeast", "river deltas", "chess openings", "tidal energy",
          "honey bees", "volcanic soil", "paper making", "wind tunnels", "coral reefs", "steam engines")
FILLER = ("the", "report", "shows", "measured", "values", "across", "several", "sites", "known", "spring")
KINDS = ("both", "image", "text")


def draw_page(path: Path, title: str, text: str, *, size=(2.0, 2.6), dpi=50) -> None:
    """Draw ``title`` and ``text`` on a white page and save it as PNG (``size`` inches at ``dpi``)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=dpi, facecolor="white")
    fig.text(0.06, 0.94, title, fontsize=9, weight="bold", va="top")
    fig.text(0.06, 0.84, "\n".join(textwrap.wrap(text, 28)[:12]), fontsize=6, va="top", family="monospace")
    fig.savefig(path, format="png", dpi=dpi, facecolor="white")


def make_page_corpus(folder: Path, n_queries: int = 3, docs_per_query: int = 6, *, seed: int = 0,
                     image_field: bool = True, size=(2.0, 2.6), dpi=50) -> dict:
    """Write the corpus (module docstring); returns ``{"kinds": {doc_id: kind}, "pages": folder / "pages"}``.

    Query ``q<i>`` is about topic i; its documents ``q<i>-d<j>`` are graded 2 (j = 0, 1), 1 (j = 2) or 0.
    With ``image_field=False`` the corpus has no image field (attach ``pages/`` with ``--images``), and
    image-only documents keep their text so that the corpus stays readable as text.
    """
    rng = random.Random(seed)
    folder = Path(folder)
    (folder / "pages").mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    corpus, queries, qrels, kinds = [], [], [], {}
    for i in range(n_queries):
        topic = TOPICS[i % len(TOPICS)]
        queries.append({"_id": f"q{i}", "text": f"what is known about {topic}?"})
        for j in range(docs_per_query):
            did = f"q{i}-d{j}"
            grade = 2 if j < 2 else (1 if j == 2 else 0)
            about = topic if grade else TOPICS[(i + j) % len(TOPICS)] if (i + j) % len(TOPICS) != i else "field notes"
            words = " ".join(rng.choice(FILLER) for _ in range(18))
            title = f"{about.title()} {j}"
            text = f"{about} {words} {about}"
            kind = KINDS[(i + j) % 3]
            kinds[did] = kind
            row = {"_id": did, "title": title, "text": text}
            if kind != "text":
                draw_page(folder / "pages" / f"{did}.png", title, text, size=size, dpi=dpi)
                if image_field:
                    row["image"] = f"pages/{did}.png"
                    if kind == "image":
                        row["title"], row["text"] = "", ""
            corpus.append(row)
            if grade:
                qrels.append(f"q{i}\t{did}\t{grade}")
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    return {"kinds": kinds, "pages": folder / "pages"}
