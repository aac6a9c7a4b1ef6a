"""Prompt templates and the rendering of one window into chat messages.

A template is plain text with placeholders ``{{QUERY}}`` and ``{{DOCUMENTS}}`` (required) and
``{{N_DOCS}}``, ``{{DOC_IDS}}`` (optional). The built-in templates live in ``judging/prompts/*.txt``;
a custom template is any string with the required placeholders, and its hash enters the judge family.

Rendering shows the judge positional ids ``doc_1 .. doc_w`` (never the real ids) in delimited blocks::

    <doc id="doc_1">
    escaped text
    </doc>

A ``"lists"`` window (two ranked lists, see :class:`judging.records.Window`) is rendered as two list
blocks whose documents carry the ids ``A1 .. Ak`` and ``B1 .. Bm``::

    <list id="A">
    <doc id="A1">
    escaped text
    </doc>
    ...
    </list>
    <list id="B">
    ...
    </list>

Document and query text are escaped like XML text (``&`` ``<`` ``>``), so no document can close its own
block, open a new one or forge the query. A per-window character budget cuts the longest documents
first (water-filling) and records which documents were cut and how long they were.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from judging.errors import PromptError
from judging.records import STAGES, content_hash

#: Appended to a document cut to fit the window budget (after escaping, so it is visible as-is).
TRUNCATION_MARKER = " [... truncated]"

_PLACEHOLDER = re.compile(r"\{\{(QUERY|DOCUMENTS|N_DOCS|DOC_IDS)\}\}")
_REQUIRED = ("{{QUERY}}", "{{DOCUMENTS}}")


@dataclass(frozen=True)
class PromptTemplate:
    """A prompt for one stage.

    Attributes
    ----------
    stage : ``"tournament"``, ``"rubric"`` or ``"lists"``.
    text : the template text with ``{{QUERY}}`` and ``{{DOCUMENTS}}`` placeholders.
    n_criteria : K for a rubric template (criteria C1..CK), 0 for a tournament or lists template.
    name : a label for messages (``"builtin:tournament"``, a file name, ...).
    """

    stage: str
    text: str
    n_criteria: int = 0
    name: str = "custom"

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise PromptError(f"prompt {self.name}: stage {self.stage!r} is not one of {STAGES}")
        missing = [p for p in _REQUIRED if p not in self.text]
        if missing:
            raise PromptError(
                f"prompt {self.name}: placeholder(s) {missing} missing; a template must contain "
                "{{QUERY}} and {{DOCUMENTS}} where the query and the document blocks go"
            )
        if self.stage == "rubric" and self.n_criteria < 1:
            raise PromptError(f"prompt {self.name}: a rubric template needs n_criteria >= 1 (criteria C1..CK)")
        if self.stage != "rubric" and self.n_criteria != 0:
            raise PromptError(f"prompt {self.name}: a {self.stage} template takes no criteria (n_criteria=0)")

    @property
    def hash(self) -> str:
        """16-hex content hash of (stage, text, n_criteria); part of the judge family."""
        return content_hash({"stage": self.stage, "text": self.text, "n_criteria": self.n_criteria})


def builtin_template(stage: str) -> PromptTemplate:
    """The project's own template for ``stage`` (rubric: the five criteria C1..C5 of METHOD section 2)."""
    if stage not in STAGES:
        raise PromptError(f"no built-in prompt for stage {stage!r}; stages are {STAGES}")
    text = resources.files("judging").joinpath("prompts", f"{stage}.txt").read_text(encoding="utf-8")
    return PromptTemplate(stage=stage, text=text, n_criteria=5 if stage == "rubric" else 0, name=f"builtin:{stage}")


def escape_text(text: str) -> str:
    """Escape ``&``, ``<``, ``>`` (XML text rules) and drop NUL characters. Inverse: :func:`unescape_text`."""
    return text.replace("\x00", "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape_text(text: str) -> str:
    """Inverse of :func:`escape_text` (used by the fake server to read documents back)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def positional_ids(n: int) -> tuple[str, ...]:
    """``("doc_1", ..., "doc_n")``: the ids the judge sees."""
    return tuple(f"doc_{i + 1}" for i in range(n))


def list_positional_ids(n: int, split: int) -> tuple[str, ...]:
    """``("A1", ..., "A<split>", "B1", ..., "B<n - split>")``: the ids the judge sees in a lists window."""
    return tuple(f"A{i + 1}" for i in range(split)) + tuple(f"B{i + 1}" for i in range(n - split))


def fit_budget(lengths: Sequence[int], budget: int | None) -> list[int]:
    """Per-document character caps so the total fits ``budget`` (water-filling: cut the longest first).

    Parameters
    ----------
    lengths : int[w], each document's length in characters.
    budget : the total characters allowed for the window's documents; ``None`` means no limit.

    Returns
    -------
    int[w] caps, ``caps[i] <= lengths[i]``, ``sum(caps) <= budget``: one common level L (documents
    shorter than L stay whole, longer ones get L or L + 1 so the budget is used up).
    """
    if budget is None or sum(lengths) <= budget:
        return list(lengths)
    remaining = max(int(budget), 0)
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    caps = list(lengths)
    for rank, i in enumerate(order):
        left = len(order) - rank
        if lengths[i] <= remaining // left:
            remaining -= lengths[i]
            continue
        level = remaining // left  # every document from here on is longer than the level
        extra = remaining - level * left
        for k, j in enumerate(order[rank:]):
            caps[j] = level + (1 if k < extra else 0)
        break
    return caps


def _cut(text: str, cap: int) -> str:
    """``text`` cut to at most ``cap`` characters, at the last whitespace in the final 20% when there is one."""
    if len(text) <= cap:
        return text
    head = text[:cap]
    space = head.rfind(" ")
    if space >= int(cap * 0.8):
        head = head[:space]
    return head.rstrip()


@dataclass(frozen=True)
class RenderedWindow:
    """A window ready to send.

    Attributes
    ----------
    messages : the chat messages (one ``user`` message holding the rendered template).
    doc_ids : real ids in window order; ``positional[i]`` names ``doc_ids[i]`` for the judge.
    positional : ``("doc_1", ..., "doc_w")`` (lists: ``("A1", ..., "B1", ...)``).
    truncated_docs : real doc id -> original length (characters) for documents cut to fit.
    n_criteria : K for a rubric window, 0 for a tournament or lists window.
    """

    messages: tuple[Mapping[str, str], ...]
    doc_ids: tuple[str, ...]
    positional: tuple[str, ...]
    truncated_docs: Mapping[str, int]
    n_criteria: int

    @property
    def text(self) -> str:
        """All message contents joined (what the fake server and the token counter read)."""
        return "\n".join(m["content"] for m in self.messages)


def render_window(
    template: PromptTemplate,
    query_text: str,
    doc_ids: Sequence[str],
    doc_texts: Sequence[str],
    *,
    max_window_chars: int | None = None,
    split: int = 0,
) -> RenderedWindow:
    """Render one window.

    Parameters
    ----------
    template : the stage's template.
    query_text : the query as the user wrote it (escaped here).
    doc_ids, doc_texts : the window's real ids and texts, in presentation order, same length w.
    max_window_chars : budget for the documents' raw text in the window (about 4 characters per token);
        ``None``: no limit. Documents over their share are cut and end with :data:`TRUNCATION_MARKER`.
    split : lists templates only: the length of list A (``doc_ids[:split]``; list B is the rest).
    """
    if len(doc_ids) != len(doc_texts):
        raise PromptError(f"render_window: {len(doc_ids)} ids but {len(doc_texts)} texts")
    two_lists = template.stage == "lists"
    if two_lists and not 1 <= split < len(doc_ids):
        raise PromptError(f"render_window: a lists window needs 1 <= split < {len(doc_ids)}, got split={split}")
    caps = fit_budget([len(t) for t in doc_texts], max_window_chars)
    if two_lists:  # a document shown in both lists is cut the same way in both
        shortest: dict[str, int] = {}
        for did, cap in zip(doc_ids, caps, strict=True):
            shortest[did] = min(cap, shortest.get(did, cap))
        caps = [shortest[did] for did in doc_ids]
    positional = list_positional_ids(len(doc_ids), split) if two_lists else positional_ids(len(doc_ids))
    blocks = []
    truncated: dict[str, int] = {}
    for pid, did, text, cap in zip(positional, doc_ids, doc_texts, caps, strict=True):
        body = escape_text(_cut(text, cap))
        if cap < len(text):
            truncated[did] = len(text)
            body += TRUNCATION_MARKER
        blocks.append(f'<doc id="{pid}">\n{body}\n</doc>')
    if two_lists:
        documents = "\n".join(
            [
                '<list id="A">', *blocks[:split], "</list>",
                '<list id="B">', *blocks[split:], "</list>",
            ]
        )
    else:
        documents = "\n".join(blocks)
    values = {
        "QUERY": escape_text(query_text),
        "DOCUMENTS": documents,
        "N_DOCS": str(len(doc_ids)),
        "DOC_IDS": ", ".join(positional),
    }
    # One pass, so placeholder-like text inside a query or document is never substituted again.
    content = _PLACEHOLDER.sub(lambda m: values[m.group(1)], template.text)
    return RenderedWindow(
        messages=({"role": "user", "content": content},),
        doc_ids=tuple(doc_ids),
        positional=positional,
        truncated_docs=truncated,
        n_criteria=template.n_criteria,
    )


_DOC_BLOCK = re.compile(r'<doc id="(doc_\d+|[AB]\d+)">\n?(.*?)\n?</doc>', re.DOTALL)
_QUERY_BLOCK = re.compile(r"<query>\n?(.*?)\n?</query>", re.DOTALL)


def read_rendered(text: str) -> tuple[str | None, list[tuple[str, str]]]:
    """Recover (query text, [(positional id, document text), ...]) from a rendered prompt.

    Only the *last* ``<query>`` block and the document blocks inside the last ``<documents>`` section
    are read, so the instructions above them cannot be mistaken for data. Texts are unescaped; a cut
    document keeps :data:`TRUNCATION_MARKER` at its end.
    """
    section = text
    start = text.rfind("<documents>")
    if start >= 0:
        end = text.find("</documents>", start)
        section = text[start : end if end >= 0 else len(text)]
    queries = _QUERY_BLOCK.findall(text)
    query = unescape_text(queries[-1]) if queries else None
    docs = [(pid, unescape_text(body)) for pid, body in _DOC_BLOCK.findall(section)]
    return query, docs
