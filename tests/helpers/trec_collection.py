"""A tiny TREC-format collection written to a folder, and its ir_datasets registration (for the loading tests).

Four topics (ids 401-404), six documents each (``FT<t>-<i>``, fewer topic words as i grows), the first three of
each topic relevant (grades 2, 1, 1). The documents file is SGML (``<DOC>``, ``<DOCNO>``, ``<HEADLINE>``,
``<TEXT>``), the topics file has ``<top>`` blocks with all four sections, the qrels are TREC qrels.
"""

from __future__ import annotations

import gzip
from pathlib import Path

TOPICS = {  # query id -> (title, description, topic words, the first the most telling)
    "401": ("solar panel efficiency", "How efficient are solar panels?",
            ["solar", "panel", "efficiency", "photovoltaic", "sunlight"]),
    "402": ("brewing coffee at home", "Ways to brew coffee at home.", ["coffee", "brewing", "espresso", "grinder", "beans"]),
    "403": ("river fish migration", "Why do fish migrate up rivers?", ["river", "fish", "salmon", "migration", "spawning"]),
    "404": ("mountain climbing safety", "Safety rules for climbers.", ["mountain", "climbing", "rope", "safety", "summit"]),
}
GRADES = (2, 1, 1, 0, 0, 0)


def doc_ids() -> list[str]:
    return [f"FT{t}-{i}" for t in range(len(TOPICS)) for i in range(6)]


def docs_sgml() -> str:
    out = []
    for t, (_, _, words) in enumerate(TOPICS.values()):
        for i in range(6):
            body = " ".join(words[: 5 - i % 4]) + f" note {i} about {words[0]} and other things number {t}{i}"
            out.append(f"<DOC>\n<DOCNO> FT{t}-{i} </DOCNO>\n<HEADLINE>\n{words[0].title()} {i}\n</HEADLINE>\n"
                       f"<TEXT>\n{body}\n</TEXT>\n</DOC>\n")
    return "".join(out)


def topics_sgml() -> str:
    return "".join(f"<top>\n<num> Number: {q}\n<title> {title}\n\n<desc> Description:\n{desc}\n\n<narr> Narrative:\n"
                   f"Documents about {words[0]} are relevant.\n</top>\n\n" for q, (title, desc, words) in TOPICS.items())


def qrels_trec() -> str:
    return "".join(f"{q} 0 FT{t}-{i} {g}\n" for t, q in enumerate(TOPICS) for i, g in enumerate(GRADES))


def write_trec(folder: Path, *, gz: bool = False, qrels: bool = True) -> dict[str, Path]:
    """Write docs (``docs.trec`` or ``docs.trec.gz``), ``topics.txt`` and ``qrels.txt``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = folder / ("docs.trec.gz" if gz else "docs.trec")
    if gz:
        docs.write_bytes(gzip.compress(docs_sgml().encode()))
    else:
        docs.write_text(docs_sgml())
    paths = {"docs": docs, "topics": folder / "topics.txt"}
    paths["topics"].write_text(topics_sgml())
    if qrels:
        paths["qrels"] = folder / "qrels.txt"
        paths["qrels"].write_text(qrels_trec())
    return paths


def register_irds(name: str, folder: Path, *, qrels: bool = True) -> str:
    """Register ``name`` in ir_datasets' registry over the files of :func:`write_trec` (ir_datasets' own
    TrecDocs / TrecQueries / TrecQrels readers); returns ``name``. A name already registered is reused."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecDocs, TrecQrels, TrecQueries
    from ir_datasets.util import LocalDownload

    if name in ir_datasets.registry._registered:
        return name
    paths = write_trec(folder, qrels=qrels)
    parts = [TrecDocs(LocalDownload(paths["docs"]), parser="sax"), TrecQueries(LocalDownload(paths["topics"]))]
    if qrels:
        parts.append(TrecQrels(LocalDownload(paths["qrels"]), {0: "not relevant", 1: "relevant", 2: "highly"}))
    ir_datasets.registry.register(name, Dataset(*parts))
    return name
