"""The rendering of one window into chat messages, and the project's built-in templates.

A template (:class:`rcp_jax.judging.prompts.template.PromptTemplate`) is plain text with placeholders
``{{QUERY}}`` and ``{{DOCUMENTS}}`` (required) and ``{{N_DOCS}}``, ``{{DOC_IDS}}`` (optional). The built-in
templates live in ``judging/prompts/*.txt`` (:func:`builtin_template`); a custom template is any string with
the required placeholders, and its hash enters the judge family.

Rendering shows the judge positional ids ``doc_1 .. doc_w`` (never the real ids) in delimited blocks::

    <doc id="doc_1">
    escaped text
    </doc>

A ``"lists"`` window (two ranked lists, see :class:`rcp_jax.judging.store.records.Window`) is rendered as two list
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

Escaping (:func:`escape_text`, applied to every document and to the query)
-----------------------------------------------------------------------------
The judge is the reader of these blocks, so a character that *looks* like a delimiter is as dangerous
as the delimiter itself. The rule, one character at a time (inverse: :func:`unescape_text`, exact):

1. ``&`` ``<`` ``>`` are written ``&amp;`` ``&lt;`` ``&gt;`` (the prompts tell the judge so).
2. Written as a numeric reference ``&#xHEX;`` (visible to the judge and to anyone reading a stored
   prompt, never interpreted):

   - the compatibility forms of the angle brackets, i.e. every character whose NFKC form is ``<`` or
     ``>`` (fullwidth ``＜ ＞`` U+FF1C/U+FF1E, small ``﹤ ﹥`` U+FE64/U+FE65), wherever they occur;
   - other angle-bracket lookalikes (``‹ › « » 〈 〉 《 》 ⟨ ⟩ ˂ ˃ ᐸ ᐳ ❮ ❯`` ...) only where they open a
     tag-like sequence: followed, ignoring invisible characters, by an optional slash (``/`` or a
     lookalike) and a delimiter name (``doc``, ``list``, ``query``, ``documents``) in any case, width
     or common Cyrillic/Greek homoglyph. Elsewhere they are ordinary punctuation (French quotes,
     Chinese title marks, inner products) and stay as they are;
   - control characters (Unicode Cc: C0 controls such as ESC, DEL, the C1 range U+0080..U+009F and
     NUL), except tab and newline; a carriage return is kept only before a line feed (CR LF);
   - format characters (Unicode Cf): bidi embeddings, overrides and isolates (U+202A..U+202E,
     U+2066..U+2069), zero-width space U+200B, word joiner U+2060, BOM U+FEFF, invisible operators,
     tag characters (U+E0000 block), ... except those ordinary text needs: soft hyphen U+00AD, the
     direction marks U+200E/U+200F/U+061C, the prepended number signs (U+0600..U+0605 ...), Egyptian
     hieroglyph format controls, and ZWNJ/ZWJ (U+200C/U+200D) between two non-ASCII letters, marks or
     symbols (Persian, Indic scripts, emoji sequences); a ZWJ/ZWNJ anywhere else is escaped;
   - line and paragraph separators U+2028/U+2029, lone surrogates, and a variation selector that
     follows another variation selector (one after a base character is kept: emoji, CJK variants;
     a run of them can smuggle hidden bytes).
3. Everything else is unchanged: accents, combining marks, CJK (fullwidth punctuation included),
   math symbols, emoji.

Page images (:mod:`rcp_jax.judging.prompts.pages`)
----------------------------------
A document given as a :class:`rcp_jax.judging.prompts.pages.Document` with a page image is shown inside its block as
the text ``[page image of doc_3]``, then the image, then its extracted text (if any); the message content
becomes a list of OpenAI content parts (``text``, ``image_url`` with a base64 ``data:`` URL, ``text``, ...)
that litellm maps to each provider. At most ``max_images`` images per window, each scaled to the limits of
:class:`rcp_jax.judging.prompts.pages.ImageLimits`: page-only documents (no text) get the slots first, in window order, then the
others; a document with text past the limit is shown by its text with a note. A window with more page-only
documents than slots is refused before any call (:func:`rcp_jax.judging.prompts.pages.check_window_images`), and
:func:`render_window` refuses it too, since such a document would not be shown at all.

So no document or query can close its own block, open a new one, forge the query or hide text from a
reader. A per-window character budget cuts the longest documents first (water-filling) and records
which documents were cut and how long they were (lengths count the raw text, before escaping).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from rcp_jax.judging.errors import PromptError
from rcp_jax.judging.prompts.pages import (
    Document, ImageError, ImageLimits, doc_image, doc_text, encode_image, message_text, page_only,
)
from rcp_jax.judging.prompts.rubric import builtin_rubric
from rcp_jax.judging.prompts.template import PromptTemplate
from rcp_jax.judging.store.records import STAGES

#: Appended to a document cut to fit the window budget (after escaping, so it is visible as-is).
TRUNCATION_MARKER = " [... truncated]"

_PLACEHOLDER = re.compile(r"\{\{(QUERY|DOCUMENTS|N_DOCS|DOC_IDS)\}\}")


def builtin_template(stage: str) -> PromptTemplate:
    """The project's own template for ``stage`` (rubric: ``prompts/rubric.txt`` filled with the built-in rubric,
    the five criteria C1..C5 of METHOD section 2; see :mod:`rcp_jax.judging.prompts.rubric`)."""
    if stage not in STAGES:
        raise PromptError(f"no built-in prompt for stage {stage!r}; stages are {STAGES}")
    if stage == "rubric":
        return builtin_rubric().template()
    text = resources.files("rcp_jax.judging.prompts").joinpath(f"{stage}.txt").read_text(encoding="utf-8")
    return PromptTemplate(stage=stage, text=text, n_criteria=0, name=f"builtin:{stage}")


#: Compatibility forms of ``<`` and ``>`` (NFKC maps them to the ASCII bracket): always escaped.
_ANGLE_FORMS = frozenset(
    c for c in ("\ufe64", "\ufe65", "\uff1c", "\uff1e") if unicodedata.normalize("NFKC", c) in "<>"
)
#: Other angle-bracket lookalikes: escaped where they open a tag-like sequence.
_ANGLE_LOOKALIKES = frozenset(
    "\u2039\u203a\u00ab\u00bb\u2329\u232a\u3008\u3009\u300a\u300b\u27e8\u27e9\u27ea\u27eb"
    "\u02c2\u02c3\u1438\u1433\u276c\u276d\u276e\u276f\u2770\u2771\u2989\u298a\u29fc\u29fd"
)
_SLASHES = frozenset("/\uff0f\u2215\u2044\u29f8\u2571\u27cb")
_TAG_NAMES = ("doc", "list", "query")  # "documents" starts with "doc"
#: Cyrillic/Greek/Armenian letters that look like the Latin letters of the delimiter names.
_HOMOGLYPHS = str.maketrans({
    "\u0501": "d", "\u043e": "o", "\u03bf": "o", "\u0585": "o", "\u1d0f": "o", "\u0441": "c",
    "\u03f2": "c", "\u1d04": "c", "\u04cf": "l", "\u01c0": "l", "\u0456": "i", "\u03b9": "i",
    "\u0455": "s", "\ua731": "s", "\u051b": "q", "\u03c5": "u", "\u057d": "u", "\u1d1c": "u",
    "\u0435": "e", "\u04bd": "e", "\u0443": "y", "\u04af": "y", "\u0433": "r", "\u0442": "t",
    "\u0578": "n", "\u043f": "n",
})
#: Format characters (Cf) that ordinary text needs; every other Cf character is escaped.
_KEPT_FORMAT = frozenset(
    ["\u00ad", "\u200e", "\u200f", "\u061c", "\u06dd", "\u070f", "\u0890", "\u0891", "\u08e2",
     "\U000110bd", "\U000110cd"]
    + [chr(c) for c in range(0x0600, 0x0606)]
    + [chr(c) for c in range(0x13430, 0x13460)]
)
_JOINERS = frozenset("\u200c\u200d")


def _invisible(c: str) -> bool:
    """Characters a reader does not see between two visible ones (skipped when looking for a tag name)."""
    return unicodedata.category(c) in ("Cf", "Mn", "Me", "Zs", "Cc") and c != "\n"


def _is_variation_selector(c: str) -> bool:
    o = ord(c)
    return 0xFE00 <= o <= 0xFE0F or 0xE0100 <= o <= 0xE01EF or 0x180B <= o <= 0x180D or o == 0x180F


def _joins(c: str | None) -> bool:
    """Whether ``c`` is a character a ZWJ/ZWNJ may legitimately sit next to (non-ASCII letter/mark/symbol)."""
    return c is not None and ord(c) > 0x7F and unicodedata.category(c)[0] in ("L", "M", "S")


def _opens_tag(text: str, i: int) -> bool:
    """Whether the lookalike bracket at ``text[i]`` is followed by ``[/]name`` (ignoring invisible
    characters, any case, width or homoglyph) with name one of the delimiter names."""
    j, n = i + 1, len(text)
    while j < n and _invisible(text[j]):
        j += 1
    if j < n and (text[j] in _SLASHES or unicodedata.normalize("NFKC", text[j]) in _SLASHES):
        j += 1
    name = ""
    while j < n and len(name) < 5:
        c = text[j]
        j += 1
        if _invisible(c):
            continue
        folded = unicodedata.normalize("NFKC", c).casefold().translate(_HOMOGLYPHS)
        if not folded.isalpha():
            break
        name += folded
    return any(name.startswith(t) for t in _TAG_NAMES)


def _needs_reference(text: str, i: int) -> bool:
    c = text[i]
    if c in _ANGLE_FORMS:
        return True
    if c in _ANGLE_LOOKALIKES:
        return _opens_tag(text, i)
    cat = unicodedata.category(c)
    if cat == "Cc":
        if c in "\t\n":
            return False
        return not (c == "\r" and text.startswith("\n", i + 1))
    if cat == "Cf":
        if c in _KEPT_FORMAT:
            return False
        if c in _JOINERS:
            return not (_joins(text[i - 1] if i else None) and _joins(text[i + 1] if i + 1 < len(text) else None))
        return True
    if cat in ("Zl", "Zp", "Cs"):
        return True
    return _is_variation_selector(c) and i > 0 and _is_variation_selector(text[i - 1])


#: Every character that may need escaping; the rest of a text is copied as it is. It must cover every
#: Cc, Cf, Zl, Zp and Cs character of the Unicode database in use (a test checks it).
_SUSPECT = re.compile(
    "[&<>\x00-\x08\x0b-\x1f\x7f-\x9f\xab\xad\xbb\u02c2\u02c3\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
    "\u08e2\u1433\u1438\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2039\u203a\u2060-\u206f\u2329\u232a"
    "\u276c-\u2771\u27e8-\u27eb\u2989\u298a\u29fc\u29fd\u3008-\u300b\ufe00-\ufe0f\ufe64\ufe65\ufeff"
    "\ufff9-\ufffb\uff1c\uff1e\ud800-\udfff\U000110bd\U000110cd\U00013430-\U0001345f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
_ASCII_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def escape_text(text: str) -> str:
    """Escape ``text`` for a ``<doc>`` or ``<query>`` block by the rule in the module docstring.

    Returns a string holding no ``<``, ``>``, no character whose NFKC form is one, no control or
    hiding character other than tab, line feed and CR LF; :func:`unescape_text` gives ``text`` back.

    >>> escape_text("a < b & \uff1c/doc\uff1e \u202eevil")
    'a &lt; b &amp; &#xFF1C;/doc&#xFF1E; &#x202E;evil'
    """

    def one(m: re.Match[str]) -> str:
        c = m.group(0)
        if c in _ASCII_ENTITIES:
            return _ASCII_ENTITIES[c]
        return f"&#x{ord(c):X};" if _needs_reference(text, m.start()) else c

    return _SUSPECT.sub(one, text)


_ENTITY = re.compile(r"&(?:(lt|gt|amp)|#x([0-9A-F]{1,6}));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&"}


def unescape_text(text: str) -> str:
    """Inverse of :func:`escape_text` (used by the fake server to read documents back): one pass, so
    ``&amp;lt;`` gives ``&lt;`` back, never ``<``."""
    return _ENTITY.sub(lambda m: _NAMED[m.group(1)] if m.group(1) else chr(int(m.group(2), 16)), text)


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
    messages : the chat messages (one ``user`` message holding the rendered template). Its content is a
        string, or, when documents carry page images, OpenAI content parts: ``{"type": "text", ...}`` and
        ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``, each image right after
        a text part ending in its label (:data:`IMAGE_LABEL`).
    doc_ids : real ids in window order; ``positional[i]`` names ``doc_ids[i]`` for the judge.
    positional : ``("doc_1", ..., "doc_w")`` (lists: ``("A1", ..., "B1", ...)``).
    truncated_docs : real doc id -> original length (characters) for documents cut to fit.
    n_criteria : K for a rubric window, 0 for a tournament or lists window.
    images : the positional ids shown with their page image, in order.
    omitted_images : real ids of documents whose image was left out (past ``max_images``); shown by text.
    """

    messages: tuple[Mapping[str, Any], ...]
    doc_ids: tuple[str, ...]
    positional: tuple[str, ...]
    truncated_docs: Mapping[str, int]
    n_criteria: int
    images: tuple[str, ...] = ()
    omitted_images: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """All message texts joined (image parts left out; what the token counter's text share reads)."""
        return "\n".join(message_text(m["content"]) for m in self.messages)


#: The text just before a page image, naming the document it shows.
IMAGE_LABEL = "[page image of {pid}]"
#: The line of a document whose image was left out (more than ``max_images`` in the window).
IMAGE_OMITTED = "[page image of {pid} not shown: at most {n} images per window]"
_SENTINEL = re.compile("\x00IMG(\\d+)\x00")


def render_window(
    template: PromptTemplate,
    query_text: str,
    doc_ids: Sequence[str],
    doc_texts: Sequence[str | Document],
    *,
    max_window_chars: int | None = None,
    split: int = 0,
    image_limits: ImageLimits | None = None,
) -> RenderedWindow:
    """Render one window.

    Parameters
    ----------
    template : the stage's template.
    query_text : the query as the user wrote it (escaped here).
    doc_ids, doc_texts : the window's real ids and texts, in presentation order, same length w. A text may
        be a :class:`rcp_jax.judging.prompts.pages.Document` with a page image: the message content is then a list of
        parts, the image inside its ``<doc>`` block right after the text part ending in
        ``[page image of doc_3]``, and its extracted text (if any) after it.
    max_window_chars : budget for the documents' raw text in the window (about 4 characters per token);
        ``None``: no limit. Documents over their share are cut and end with :data:`TRUNCATION_MARKER`.
    split : lists templates only: the length of list A (``doc_ids[:split]``; list B is the rest).
    image_limits : size and count limits of the images (default :class:`rcp_jax.judging.prompts.pages.ImageLimits`): at most
        ``max_images`` images are shown, page-only documents first; other documents past the limit are shown by
        their text alone. More page-only documents than that raise :class:`rcp_jax.judging.prompts.pages.ImageError`.
    """
    values_in = list(doc_texts)
    doc_texts = [doc_text(v) for v in values_in]
    limits = image_limits or ImageLimits()
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
    encoded, shown, omitted = [], [], []
    with_image = _image_slots(doc_ids, values_in, limits)
    for i, (pid, did, text, cap, value) in enumerate(zip(positional, doc_ids, doc_texts, caps, values_in, strict=True)):
        body = escape_text(_cut(text, cap))
        if cap < len(text):
            truncated[did] = len(text)
            body += TRUNCATION_MARKER
        image = doc_image(value)
        if image is not None and i in with_image:
            marker = f"\x00IMG{len(encoded)}\x00"
            encoded.append(encode_image(image, limits, doc_id=did))
            shown.append(pid)
            body = IMAGE_LABEL.format(pid=pid) + marker + (f"\n{body}" if body else "")
        elif image is not None:
            omitted.append(did)
            body = IMAGE_OMITTED.format(pid=pid, n=limits.max_images) + (f"\n{body}" if body else "")
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
    content: Any = _PLACEHOLDER.sub(lambda m: values[m.group(1)], template.text)
    if encoded:
        if "\x00" in template.text:
            raise PromptError(f"prompt {template.name}: holds a NUL character; remove it (windows with page images "
                              "mark the images' places with it)")
        content = _parts(content, encoded)
    return RenderedWindow(
        messages=({"role": "user", "content": content},),
        doc_ids=tuple(doc_ids),
        positional=positional,
        truncated_docs=truncated,
        n_criteria=template.n_criteria,
        images=tuple(shown),
        omitted_images=tuple(omitted),
    )


def _image_slots(doc_ids: Sequence[str], values: Sequence[str | Document], limits: ImageLimits) -> set[int]:
    """Positions of the window whose image is shown: page-only documents first, then the others with an image, in
    window order, at most ``limits.max_images``; raises :class:`rcp_jax.judging.prompts.pages.ImageError` when page-only documents
    alone exceed it (they would not be shown at all)."""
    only = [i for i, v in enumerate(values) if page_only(v)]
    if len(only) > limits.max_images:
        names = ", ".join(str(doc_ids[i]) for i in only[limits.max_images:][:5])
        raise ImageError(f"a window holds {len(only)} page images without text but shows at most {limits.max_images} "
                         f"images: {names} would not be shown at all; raise the image limit (--images-per-window) or "
                         "give those documents their extracted text")
    first = set(only)
    rest = [i for i, v in enumerate(values) if doc_image(v) is not None and i not in first]
    return set(only + rest[: limits.max_images - len(only)])


def _parts(content: str, encoded: Sequence[Any]) -> list[dict[str, Any]]:
    """``content`` (with image markers) as OpenAI content parts: text, image_url, text, ..."""
    parts: list[dict[str, Any]] = []
    at = 0
    for m in _SENTINEL.finditer(content):
        if m.start() > at:
            parts.append({"type": "text", "text": content[at : m.start()]})
        parts.append({"type": "image_url", "image_url": {"url": encoded[int(m.group(1))].url}})
        at = m.end()
    if at < len(content):
        parts.append({"type": "text", "text": content[at:]})
    return parts


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
