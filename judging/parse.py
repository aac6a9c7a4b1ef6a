"""Reading a judge's answer text: tolerant decoding, then strict validation.

Decoding forgives what models commonly wrap around an answer: ``<think>`` blocks, one code fence,
prose before or after the object, LaTeX-style backslashes that are not JSON escapes (``\\alpha``),
trailing commas and raw newlines inside strings. Validation forgives nothing that changes a grade:

- every window document exactly once (ids are the positional ``doc_1 .. doc_w`` the judge saw, mapped
  back to the real ids here); an id outside the window is never accepted;
- tournament scores finite numbers in [-5, 5] (numeric strings allowed, booleans not);
- rubric criteria exactly C1..CK, each 0 or 1 (``"0"``/``"1"`` allowed; booleans and floats not);
- a lists answer's ``better`` exactly ``"A"`` or ``"B"`` (case and surrounding spaces forgiven; a tie,
  ``"both"``, ``"List A"`` or a missing value are not: there is no default pick).

A rejected answer is a :class:`ParseResult` with ``valid=False`` and a category from
:data:`judging.records.INVALID_CATEGORIES`; there is no default grade.

Example
-------
>>> r = parse_tournament('<think>hmm</think>{"scores": {"doc_1": 2, "doc_2": -1}}', ["d7", "d3"])
>>> r.valid, r.scores
(True, {'d7': 2.0, 'd3': -1.0})
>>> parse_tournament('{"scores": {"doc_1": 2}}', ["d7", "d3"]).category
'incomplete'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from judging.render import positional_ids

#: Bumped whenever validation rules change; part of the judge family, so new rules make new records.
PARSER_VERSION = "1"

SCORE_MIN, SCORE_MAX = -5.0, 5.0
_MAX_CANDIDATES = 64


@dataclass(frozen=True)
class ParseResult:
    """Outcome of parsing one answer.

    Attributes
    ----------
    valid : whether the answer passed validation.
    category : ``None`` when valid, else one of no_json, invalid_json, schema, incomplete, truncated, refused.
    detail : a one-line human reason when invalid.
    scores : tournament: real doc id -> score (float in [-5, 5]); ``None`` when invalid or rubric.
    criteria : rubric: real doc id -> (C1, ..., CK) in {0, 1}; ``None`` when invalid or tournament.
    better : lists: ``"A"`` or ``"B"`` (the list as shown); ``None`` when invalid or another stage.
    """

    valid: bool
    category: str | None = None
    detail: str = ""
    scores: dict[str, float] | None = None
    criteria: dict[str, tuple[int, ...]] | None = None
    better: str | None = None


class _Reject(Exception):
    def __init__(self, category: str, detail: str) -> None:
        super().__init__(detail)
        self.category = category
        self.detail = detail


# ----------------------------------------------------------------------------------------------------
# Decoding
# ----------------------------------------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})|\\')
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_REFUSAL = re.compile(
    r"\b(i'?m sorry|i am sorry|i can(?:no|')t|i cannot|i am unable|i'?m unable|i won'?t|unable to comply|"
    r"not able to (?:help|assist)|as an ai)\b",
    re.IGNORECASE,
)


def strip_thinking(text: str) -> str:
    """Remove ``<think>...</think>`` blocks; an unclosed opening tag hides the rest of the text, and a
    closing tag without an opening one (some servers drop it) hides everything before it."""
    text = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip()


def _balanced_end(s: str, start: int) -> int | None:
    """Index of the ``}`` closing the object that opens at ``s[start]``, ignoring braces in strings."""
    depth = 0
    in_str = False
    esc = False
    for i in range(start, len(s)):
        c = s[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _repair(span: str) -> str:
    """Double every backslash that does not start a JSON escape; drop trailing commas."""
    span = _ESCAPE.sub(lambda m: m.group(0) if m.group(1) else "\\\\", span)
    return _TRAILING_COMMA.sub(r"\1", span)


def _loads(span: str) -> dict[str, Any]:
    """``json.loads`` that keeps duplicate keys visible (``__duplicate_keys__``) and NaN as a float."""
    dupes: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                dupes.append(k)
            out[k] = v
        return out

    obj = json.loads(span, strict=False, object_pairs_hook=pairs)
    if dupes:
        raise _Reject("schema", f"key {dupes[0]!r} appears more than once")
    return obj


def decode_answer(
    text: str | None,
    *,
    finish_reason: str | None = None,
    looks_like: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """The answer object inside ``text``.

    Returns the first complete JSON object that ``looks_like`` accepts (or, if none does, the first
    complete JSON object). Raises ``_Reject`` with category no_json, invalid_json, truncated or refused.
    """
    raw = text or ""
    if finish_reason == "content_filter":
        raise _Reject("refused", "the endpoint stopped the answer with finish_reason=content_filter")
    body = strip_thinking(raw)
    fenced = _FENCE.search(body)
    candidates_text = [fenced.group(1), body] if fenced else [body]
    first: dict[str, Any] | None = None
    unterminated = False
    broken: str | None = None
    for s in candidates_text:
        starts = [m.start() for m in re.finditer(r"\{", s)][:_MAX_CANDIDATES]
        skip_until = -1
        for start in starts:
            if start <= skip_until:
                continue
            end = _balanced_end(s, start)
            if end is None:
                unterminated = True
                continue  # nested objects may still be complete; only an answer-shaped one is taken
            skip_until = end
            span = s[start : end + 1]
            try:
                try:
                    obj = _loads(span)
                except json.JSONDecodeError:
                    obj = _loads(_repair(span))
            except json.JSONDecodeError as exc:
                broken = broken or f"not valid JSON even after repairs ({exc.msg} at char {exc.pos})"
                continue
            if looks_like is None or looks_like(obj):
                return obj
            if first is None and not unterminated:
                first = obj
        if first is not None:
            return first
    if unterminated:
        if finish_reason == "length":
            raise _Reject("truncated", "the answer was cut off (finish_reason=length) before its JSON object closed")
        raise _Reject("truncated", "the JSON object is never closed")
    if broken:
        raise _Reject("invalid_json", broken)
    if finish_reason == "length":
        raise _Reject("truncated", "the answer was cut off (finish_reason=length) before any JSON object")
    if _REFUSAL.search(body or raw):
        raise _Reject("refused", "the judge declined to answer")
    raise _Reject("no_json", "no JSON object in the answer")


# ----------------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------------


def _doc_key(key: str) -> str:
    return key.strip().lower()


def _score(value: Any, pid: str) -> float:
    if isinstance(value, bool) or value is None:
        raise _Reject("schema", f"score of {pid} is {json.dumps(value)}, not a number")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise _Reject("schema", f"score of {pid} is the string {value!r}, not a number") from None
    if not isinstance(value, int | float):
        raise _Reject("schema", f"score of {pid} is a {type(value).__name__}, not a number")
    value = float(value)
    if not math.isfinite(value):
        raise _Reject("schema", f"score of {pid} is {value}, not a finite number")
    if not SCORE_MIN <= value <= SCORE_MAX:
        raise _Reject("schema", f"score of {pid} is {value:g}, outside [-5, 5]")
    return value


def _answer(value: Any, pid: str, crit: str) -> int:
    if isinstance(value, bool):
        raise _Reject("schema", f"{pid} {crit} is {json.dumps(value)}; answers must be 0 or 1, not booleans")
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    raise _Reject("schema", f"{pid} {crit} is {json.dumps(value)}; answers must be 0 or 1")


def _map_ids(keys: Sequence[str], positional: Sequence[str], what: str) -> dict[str, str]:
    """original key -> positional id; unknown or repeated ids raise schema; missing ids raise incomplete
    (after every key was checked, so a schema problem wins over a missing document)."""
    allowed = set(positional)
    seen: dict[str, str] = {}
    for key in keys:
        norm = _doc_key(key)
        if norm not in allowed:
            raise _Reject("schema", f"{what} names {key!r}, which is not a document of this window ({positional[0]}..{positional[-1]})")
        if norm in seen.values():
            raise _Reject("schema", f"{what} names {norm} more than once")
        seen[key] = norm
    missing = [p for p in positional if p not in seen.values()]
    if missing:
        raise _Reject("incomplete", f"{what} lacks {', '.join(missing)}")
    return seen


def _validate_tournament(obj: dict[str, Any], doc_ids: Sequence[str]) -> dict[str, float]:
    positional = positional_ids(len(doc_ids))
    scores = obj.get("scores")
    if not isinstance(scores, dict):
        raise _Reject("schema", "no 'scores' object" if scores is None else "'scores' is not an object")
    ranking = obj.get("ranking")
    if ranking is not None:
        if not isinstance(ranking, list) or not all(isinstance(r, str) for r in ranking):
            raise _Reject("schema", "'ranking' is not a list of document ids")
        unknown = [r for r in ranking if _doc_key(r) not in positional]
        if unknown:
            raise _Reject("schema", f"'ranking' names {unknown[0]!r}, which is not a document of this window")
    mapping = _map_ids(list(scores), positional, "'scores'")
    by_pos = {mapping[k]: _score(v, mapping[k]) for k, v in scores.items()}
    return {doc_ids[i]: by_pos[p] for i, p in enumerate(positional)}


def _validate_rubric(obj: dict[str, Any], doc_ids: Sequence[str], n_criteria: int) -> dict[str, tuple[int, ...]]:
    positional = positional_ids(len(doc_ids))
    names = [f"C{k + 1}" for k in range(n_criteria)]
    # Type and criteria problems of the documents present are schema errors even when others are missing.
    answers: dict[str, tuple[int, ...]] = {}
    for key, entry in obj.items():
        pid = _doc_key(key)
        if pid not in positional:
            raise _Reject("schema", f"the answer names {key!r}, which is not a document of this window ({positional[0]}..{positional[-1]})")
        if pid in answers:
            raise _Reject("schema", f"the answer names {pid} more than once")
        if not isinstance(entry, dict) or not isinstance(entry.get("criteria"), dict):
            raise _Reject("schema", f"{pid} has no 'criteria' object")
        crit = {str(c).strip().upper(): v for c, v in entry["criteria"].items()}
        if len(crit) != len(entry["criteria"]):
            raise _Reject("schema", f"{pid} repeats a criterion")
        extra = sorted(set(crit) - set(names))
        if extra:
            raise _Reject("schema", f"{pid} answers unknown criteria {extra}; expected exactly {names[0]}..{names[-1]}")
        lacking = [c for c in names if c not in crit]
        if lacking:
            raise _Reject("schema", f"{pid} lacks criteria {lacking}")
        answers[pid] = tuple(_answer(crit[c], pid, c) for c in names)
    missing = [p for p in positional if p not in answers]
    if missing:
        raise _Reject("incomplete", f"the answer lacks {', '.join(missing)}")
    return {doc_ids[i]: answers[p] for i, p in enumerate(positional)}


def _validate_lists(obj: dict[str, Any]) -> str:
    if "better" not in obj:
        raise _Reject("schema", "no 'better' key; the answer must name list \"A\" or \"B\"")
    value = obj["better"]
    if not isinstance(value, str):
        raise _Reject("schema", f"'better' is {json.dumps(value)}; it must be the string \"A\" or \"B\"")
    pick = value.strip().upper()
    if pick not in ("A", "B"):
        raise _Reject("schema", f"'better' is {value!r}; it must be \"A\" or \"B\" (no ties, no other lists)")
    return pick


def _tournament_shaped(obj: dict[str, Any]) -> bool:
    return "scores" in obj


def _lists_shaped(obj: dict[str, Any]) -> bool:
    return "better" in obj


def _rubric_shaped(obj: dict[str, Any]) -> bool:
    return any(re.fullmatch(r"doc_\d+", _doc_key(k)) for k in obj)


def parse_tournament(text: str | None, doc_ids: Sequence[str], *, finish_reason: str | None = None) -> ParseResult:
    """Parse a tournament answer for a window whose documents are ``doc_ids`` (real ids, shown order).

    Returns scores keyed by real doc id, or an invalid result.
    """
    try:
        obj = decode_answer(text, finish_reason=finish_reason, looks_like=_tournament_shaped)
        return ParseResult(valid=True, scores=_validate_tournament(obj, doc_ids))
    except _Reject as r:
        return ParseResult(valid=False, category=r.category, detail=r.detail)


def parse_rubric(
    text: str | None, doc_ids: Sequence[str], n_criteria: int = 5, *, finish_reason: str | None = None
) -> ParseResult:
    """Parse a rubric answer with criteria C1..C``n_criteria`` for the window's ``doc_ids``."""
    try:
        obj = decode_answer(text, finish_reason=finish_reason, looks_like=_rubric_shaped)
        return ParseResult(valid=True, criteria=_validate_rubric(obj, doc_ids, n_criteria))
    except _Reject as r:
        return ParseResult(valid=False, category=r.category, detail=r.detail)


def parse_lists(text: str | None, *, finish_reason: str | None = None) -> ParseResult:
    """Parse a two-list answer ``{"reasoning": ..., "better": "A" | "B"}``; ``better`` is the list as shown.

    >>> parse_lists('{"reasoning": "A puts the answer first.", "better": "a"}').better
    'A'
    >>> parse_lists('{"better": "tie"}').category
    'schema'
    """
    try:
        obj = decode_answer(text, finish_reason=finish_reason, looks_like=_lists_shaped)
        return ParseResult(valid=True, better=_validate_lists(obj))
    except _Reject as r:
        return ParseResult(valid=False, category=r.category, detail=r.detail)


def parse_answer(
    text: str | None,
    *,
    stage: str,
    doc_ids: Sequence[str],
    n_criteria: int = 5,
    finish_reason: str | None = None,
) -> ParseResult:
    """Dispatch to :func:`parse_tournament`, :func:`parse_rubric` or :func:`parse_lists` by ``stage``."""
    if stage == "tournament":
        return parse_tournament(text, doc_ids, finish_reason=finish_reason)
    if stage == "lists":
        return parse_lists(text, finish_reason=finish_reason)
    return parse_rubric(text, doc_ids, n_criteria, finish_reason=finish_reason)


# ----------------------------------------------------------------------------------------------------
# Planted answers (prompt injection)
# ----------------------------------------------------------------------------------------------------

_SHAPES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "tournament": _tournament_shaped,
    "rubric": _rubric_shaped,
    "lists": _lists_shaped,
}


def _objects_in(text: str) -> set[str]:
    """Canonical JSON of every JSON object written in ``text`` (nested ones too; at most 64 tried)."""
    found: set[str] = set()
    for m in list(re.finditer(r"\{", text))[:_MAX_CANDIDATES]:
        end = _balanced_end(text, m.start())
        if end is None:
            continue
        span = text[m.start() : end + 1]
        try:
            try:
                obj = _loads(span)
            except json.JSONDecodeError:
                obj = _loads(_repair(span))
        except (json.JSONDecodeError, _Reject):
            continue
        found.add(json.dumps(obj, sort_keys=True))
    return found


def echoed_documents(
    text: str | None,
    doc_ids: Sequence[str],
    doc_texts: Sequence[str],
    *,
    stage: str,
    finish_reason: str | None = None,
) -> list[str]:
    """The documents of a window whose text contains the very answer object the judge gave.

    A judge does not copy its verdict out of a document it is grading: an answer object equal (as JSON)
    to one written inside a document means a planted answer was repeated, i.e. a prompt injection
    worked. Parsing does not depend on this check (an answer for documents outside the window is
    refused whatever its origin); it is reported, so the window and the document can be inspected.

    Returns the ids (from ``doc_ids``) of the documents holding the answer, in window order.
    """
    if not any("{" in t for t in doc_texts):
        return []
    try:
        obj = decode_answer(text, finish_reason=finish_reason, looks_like=_SHAPES.get(stage))
    except _Reject:
        return []
    answer = json.dumps(obj, sort_keys=True)
    return [d for d, t in zip(doc_ids, doc_texts, strict=True) if "{" in t and answer in _objects_in(t)]
