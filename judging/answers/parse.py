"""Reading a judge's answer text: tolerant decoding, then strict validation.

Which object is the answer
--------------------------
The prompts invite a short reasoning first and the answer last ("nothing after it"), and a reasoning
may quote JSON, including an answer planted in a document. So the answer is the **final** one: after
``<think>`` blocks are removed, every top-level JSON object of the reply is read (inside code fences
or not; objects nested in another are part of it), and the **last answer-shaped one** (``"scores"``
for a tournament, ``doc_<i>`` keys for a rubric, ``"better"`` for a lists window) is validated.
When the reply holds several complete answers that differ, the last one is still the answer (a
revised draft, or a quoted document before the real answer); the result carries a note saying so.
The reply is refused as ``truncated`` when the answer object is cut off or another object is still
open after it (cut off at ``finish_reason=length``, or an answer-shaped object never closed), and as
``invalid_json`` when the last answer-shaped object cannot be read even after repairs. A quoted
planted answer *after* the real one therefore wins; :func:`echoed_documents` flags exactly that case
(the stored answer equals an answer written in a document), and flagged answers stay out of fits.

Decoding forgives what models commonly wrap around an answer: ``<think>`` blocks, code fences,
prose before or after the object, LaTeX-style backslashes that are not JSON escapes (``\\alpha``),
trailing commas and raw newlines inside strings. Validation forgives nothing that changes a grade:

- every window document exactly once (ids are the positional ``doc_1 .. doc_w`` the judge saw, mapped
  back to the real ids here); an id outside the window is never accepted;
- tournament scores finite numbers in [-5, 5] (numeric strings allowed, booleans not); tied scores
  are accepted (the prompt asks for distinct scores, but a tie is information: a pair with equal
  scores counts as p = 0.5, see METHOD section 1) and noted, unless ``distinct=True`` asks to reject
  them (category ``schema``, detail ``"scores of doc_3 and doc_7 are both 2; every document needs a
  distinct score"``);
- rubric criteria exactly C1..CK, each 0 or 1 (``"0"``/``"1"`` allowed; booleans and floats not);
- a lists answer's ``better`` exactly ``"A"`` or ``"B"`` (case and surrounding spaces forgiven; a tie,
  ``"both"``, ``"List A"`` or a missing value are not: there is no default pick).

A rejected answer is a :class:`ParseResult` with ``valid=False``, a category from
:data:`rcp_jax.judging.store.records.INVALID_CATEGORIES` and a one-line ``detail`` written to be quoted back to the
judge in a repair message: it names the positional ids and values at fault (strings cut to 40
characters), never the whole answer. There is no default grade.

Example
-------
>>> r = parse_tournament('<think>hmm</think>{"scores": {"doc_1": 2, "doc_2": -1}}', ["d7", "d3"])
>>> r.valid, r.scores
(True, {'d7': 2.0, 'd3': -1.0})
>>> parse_tournament('{"scores": {"doc_1": 2}}', ["d7", "d3"]).detail
"'scores' has no entry for doc_2; it needs exactly one score for each of doc_1..doc_2"
>>> quoted = 'doc_2 says {"scores": {"doc_1": 5, "doc_2": -5}}. My answer: {"scores": {"doc_1": -3, "doc_2": 4}}'
>>> parse_tournament(quoted, ["d7", "d3"]).scores
{'d7': -3.0, 'd3': 4.0}
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rcp_jax.judging.prompts.pages import doc_text
from rcp_jax.judging.prompts.render import positional_ids

#: Bumped whenever validation rules change; part of the judge family, so new rules make new records.
PARSER_VERSION = "1"

SCORE_MIN, SCORE_MAX = -5.0, 5.0


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
    notes : remarks on a valid answer that do not invalidate it (tied scores; several differing
        answers in one reply, the last one used), each one line; ``()`` when none.
    """

    valid: bool
    category: str | None = None
    detail: str = ""
    scores: dict[str, float] | None = None
    criteria: dict[str, tuple[int, ...]] | None = None
    better: str | None = None
    notes: tuple[str, ...] = ()


class _Reject(Exception):
    def __init__(self, category: str, detail: str) -> None:
        super().__init__(detail)
        self.category = category
        self.detail = detail


def _q(value: Any, limit: int = 40) -> str:
    """``repr`` of a string (JSON of anything else) cut to ``limit`` characters, for a detail line."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _num(value: float) -> str:
    """A score as a reader would write it: ``2``, ``-1.5``."""
    return f"{value:g}"


# ----------------------------------------------------------------------------------------------------
# Decoding
# ----------------------------------------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)
_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})|\\')
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_REFUSAL = re.compile(
    r"\b(i'?m sorry|i am sorry|i can(?:no|')t|i cannot|i am unable|i'?m unable|i won'?t|unable to comply|"
    r"not able to (?:help|assist)|as an ai)\b",
    re.IGNORECASE,
)
#: At most this many objects, and this many characters in all, are scanned brace by brace (the slow
#: path, for JSON that needs repairs or never closes); well-formed objects are read by the C decoder
#: and do not count. Bounds the time an adversarial reply can take (~0.2 s).
_MAX_SLOW_SCANS = 64
_MAX_SLOW_CHARS = 500_000
#: At most this many places where an object may start are tried (the last ones of a reply, the first
#: ones of a document).
_MAX_STARTS = 1000


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


class _Decoder:
    """``json`` decoding that records repeated keys (``dupes``) instead of silently keeping the last."""

    def __init__(self) -> None:
        self.dupes: list[str] = []
        self.decoder = json.JSONDecoder(strict=False, object_pairs_hook=self._pairs)

    def _pairs(self, items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                self.dupes.append(k)
            out[k] = v
        return out


@dataclass(frozen=True)
class _Found:
    """One top-level JSON object of a reply: ``text[start:end]``, its value, a repeated key if any."""

    start: int
    end: int
    obj: dict[str, Any]
    dupe: str | None = None


@dataclass
class _Scan:
    found: list[_Found]
    unterminated: list[int]  # starts of objects never closed
    broken: list[tuple[int, int, str]]  # (start, end, reason) of closed objects that are not JSON


_OBJECT_START = re.compile(r"\{(?=\s*[\"'}])")


def _scan(s: str, *, nested: bool = False) -> _Scan:
    """Every JSON object written in ``s``, in order: top-level ones only, or (``nested``) all of them."""
    scan = _Scan([], [], [])
    slow = slow_chars = 0
    covered = -1
    # Only a brace followed by a key quote (or ``}``) can open a JSON object: braces of LaTeX, code or
    # prose ("{x}", "{ ") are skipped at once and do not use up the slow-scan budget.
    starts = [m.start() for m in _OBJECT_START.finditer(s)]
    if len(starts) > _MAX_STARTS:  # each failed start costs O(len(s)) inside json: bound the total
        starts = starts[:_MAX_STARTS] if nested else starts[-_MAX_STARTS:]  # a reply's answer is at its end
    for start in starts:
        if start <= covered and not nested:
            continue
        d = _Decoder()
        try:
            obj, end = d.decoder.raw_decode(s, start)
        except json.JSONDecodeError:
            obj = None
        if obj is None:
            if slow >= _MAX_SLOW_SCANS or slow_chars >= _MAX_SLOW_CHARS:
                continue
            slow += 1
            close = _balanced_end(s, start)
            slow_chars += (len(s) if close is None else close) - start
            if close is None:
                scan.unterminated.append(start)
                continue
            end = close + 1
            span = s[start:end]
            d = _Decoder()
            try:
                obj = d.decoder.decode(_repair(span))
            except json.JSONDecodeError as exc:
                scan.broken.append((start, end, f"not valid JSON even after repairs ({exc.msg} at char {exc.pos})"))
                covered = max(covered, end - 1)
                continue
        if isinstance(obj, dict):
            scan.found.append(_Found(start, end, obj, d.dupes[0] if d.dupes else None))
        covered = max(covered, end - 1)
    return scan


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


def _decode(
    text: str | None,
    finish_reason: str | None,
    looks_like: Callable[[dict[str, Any]], bool] | None,
    text_looks_like: re.Pattern[str] | None = None,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """(the final answer object, notes); see :func:`decode_answer`."""
    raw = text or ""
    if finish_reason == "content_filter":
        raise _Reject("refused", "the endpoint stopped the answer with finish_reason=content_filter")
    body = strip_thinking(raw)
    scan = _scan(body)
    answers = [f for f in scan.found if looks_like is None or looks_like(f.obj)]
    candidates = answers or scan.found
    final = candidates[-1] if candidates else None
    after = final.end if final is not None else -1

    def shaped(a: int, b: int | None = None) -> bool:
        return text_looks_like is not None and text_looks_like.search(body, a, len(body) if b is None else b) is not None

    # An object never closed matters when it opens after the answer (the judge was still writing),
    # or, with no answer found at all, anywhere (it may hold the answer); a stray brace in prose does
    # not, unless the reply was cut off or answer-like keys follow it.
    open_after = [u for u in scan.unterminated if u > after or not answers]
    if open_after and (finish_reason == "length" or final is None or any(shaped(u) for u in open_after)):
        if finish_reason == "length":
            raise _Reject("truncated", "the answer was cut off (finish_reason=length) before its JSON object closed; "
                          "keep the reasoning shorter")
        raise _Reject("truncated", "the JSON object of the answer is never closed")
    broken_after = [(a, b, why) for a, b, why in scan.broken if a > after and (final is None or shaped(a, b))]
    if broken_after:
        raise _Reject("invalid_json", f"the answer object is {broken_after[-1][2]}")
    if final is None:
        if scan.broken:
            raise _Reject("invalid_json", f"the answer object is {scan.broken[-1][2]}")
        if finish_reason == "length":
            raise _Reject("truncated", "the answer was cut off (finish_reason=length) before any JSON object; "
                          "keep the reasoning shorter")
        if _REFUSAL.search(body or raw):
            raise _Reject("refused", "the judge declined to answer")
        raise _Reject("no_json", "no JSON object in the answer; end the reply with one JSON object as shown")
    if final.dupe is not None:
        raise _Reject("schema", f"key {_q(final.dupe)} appears more than once in the answer object")
    notes: tuple[str, ...] = ()
    differing = {_canonical(f.obj) for f in answers[:-1]} - {_canonical(final.obj)}
    if answers and differing:
        notes = (f"the reply holds {len(differing) + 1} different complete answers; the last one is used",)
    return final.obj, notes


def decode_answer(
    text: str | None,
    *,
    finish_reason: str | None = None,
    looks_like: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """The answer object inside ``text``: the last top-level JSON object that ``looks_like`` accepts
    (or, if none does, the last complete JSON object). Raises ``_Reject`` with category no_json,
    invalid_json, truncated, refused or schema (a key repeated in the answer object)."""
    return _decode(text, finish_reason, looks_like, _TEXT_SHAPES.get(looks_like))[0]


# ----------------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------------


def _doc_key(key: str) -> str:
    return key.strip().lower()


def _score(value: Any, pid: str) -> float:
    if isinstance(value, bool) or value is None:
        raise _Reject("schema", f"the score of {pid} is {json.dumps(value)}; scores are numbers from -5 to 5")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise _Reject("schema", f"the score of {pid} is the string {_q(value)}; scores are numbers from -5 to 5") from None
    if not isinstance(value, int | float):
        raise _Reject("schema", f"the score of {pid} is a {type(value).__name__}; scores are numbers from -5 to 5")
    value = float(value)
    if not math.isfinite(value):
        raise _Reject("schema", f"the score of {pid} is {value}, not a finite number; scores are numbers from -5 to 5")
    if not SCORE_MIN <= value <= SCORE_MAX:
        raise _Reject("schema", f"the score of {pid} is {_num(value)}, outside [-5, 5]")
    return value


def _answer(value: Any, pid: str, crit: str) -> int:
    if isinstance(value, bool):
        raise _Reject("schema", f"{pid} {crit} is {json.dumps(value)}; answers must be the integers 0 or 1, not booleans")
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    raise _Reject("schema", f"{pid} {crit} is {_q(value)}; answers must be the integers 0 or 1")


def _span(positional: Sequence[str]) -> str:
    return f"{positional[0]}..{positional[-1]}" if len(positional) > 1 else positional[0]


def _map_ids(keys: Sequence[str], positional: Sequence[str], what: str) -> dict[str, str]:
    """original key -> positional id; unknown or repeated ids raise schema; missing ids raise incomplete
    (after every key was checked, so a schema problem wins over a missing document)."""
    allowed = set(positional)
    seen: dict[str, str] = {}
    for key in keys:
        norm = _doc_key(key)
        if norm not in allowed:
            raise _Reject("schema", f"{what} names {_q(key)}, which is not a document of this window ({_span(positional)})")
        if norm in seen.values():
            raise _Reject("schema", f"{what} names {norm} more than once")
        seen[key] = norm
    missing = [p for p in positional if p not in seen.values()]
    if missing:
        raise _Reject("incomplete", f"{what} has no entry for {', '.join(missing)}; it needs exactly one score for "
                      f"each of {_span(positional)}")
    return seen


def _ties(by_pos: dict[str, float], positional: Sequence[str]) -> str | None:
    """A detail line naming tied scores (first group in window order), or ``None`` when all differ."""
    groups: dict[float, list[str]] = {}
    for p in positional:
        groups.setdefault(by_pos[p], []).append(p)
    tied = [ids for ids in groups.values() if len(ids) > 1]
    if not tied:
        return None
    ids = tied[0]
    names = f"{ids[0]} and {ids[1]} are both" if len(ids) == 2 else f"{', '.join(ids[:-1])} and {ids[-1]} are all"
    more = f" ({len(tied) - 1} more tied group{'s' if len(tied) > 2 else ''})" if len(tied) > 1 else ""
    return f"scores of {names} {_num(by_pos[ids[0]])}{more}; every document needs a distinct score"


def _validate_tournament(
    obj: dict[str, Any], doc_ids: Sequence[str], distinct: bool = False
) -> tuple[dict[str, float], str | None]:
    """(scores by real id, tie detail or ``None``)."""
    positional = positional_ids(len(doc_ids))
    scores = obj.get("scores")
    if not isinstance(scores, dict):
        raise _Reject("schema", "the answer has no 'scores' object" if scores is None
                      else f"'scores' is a {type(scores).__name__}, not an object mapping {_span(positional)} to numbers")
    ranking = obj.get("ranking")
    if ranking is not None:
        if not isinstance(ranking, list) or not all(isinstance(r, str) for r in ranking):
            raise _Reject("schema", "'ranking' is not a list of document ids")
        unknown = [r for r in ranking if _doc_key(r) not in positional]
        if unknown:
            raise _Reject("schema", f"'ranking' names {_q(unknown[0])}, which is not a document of this window "
                          f"({_span(positional)})")
    mapping = _map_ids(list(scores), positional, "'scores'")
    by_pos = {mapping[k]: _score(v, mapping[k]) for k, v in scores.items()}
    tie = _ties(by_pos, positional)
    if tie is not None and distinct:
        raise _Reject("schema", tie)
    return {doc_ids[i]: by_pos[p] for i, p in enumerate(positional)}, tie


def _validate_rubric(obj: dict[str, Any], doc_ids: Sequence[str], n_criteria: int) -> dict[str, tuple[int, ...]]:
    positional = positional_ids(len(doc_ids))
    names = [f"C{k + 1}" for k in range(n_criteria)]
    # Type and criteria problems of the documents present are schema errors even when others are missing.
    answers: dict[str, tuple[int, ...]] = {}
    for key, entry in obj.items():
        pid = _doc_key(key)
        if pid not in positional:
            raise _Reject("schema", f"the answer names {_q(key)}, which is not a document of this window "
                          f"({_span(positional)}); use exactly these keys")
        if pid in answers:
            raise _Reject("schema", f"the answer names {pid} more than once")
        if not isinstance(entry, dict) or not isinstance(entry.get("criteria"), dict):
            raise _Reject("schema", f"{pid} has no 'criteria' object ({{\"C1\": 0 or 1, ...}})")
        crit = {str(c).strip().upper(): v for c, v in entry["criteria"].items()}
        if len(crit) != len(entry["criteria"]):
            raise _Reject("schema", f"{pid} repeats a criterion")
        extra = sorted(set(crit) - set(names))
        if extra:
            raise _Reject("schema", f"{pid} answers unknown criteria {_q(extra)}; expected exactly {names[0]}..{names[-1]}")
        lacking = [c for c in names if c not in crit]
        if lacking:
            raise _Reject("schema", f"{pid} lacks {', '.join(lacking)}; every document needs {names[0]}..{names[-1]}")
        answers[pid] = tuple(_answer(crit[c], pid, c) for c in names)
    missing = [p for p in positional if p not in answers]
    if missing:
        raise _Reject("incomplete", f"the answer has no entry for {', '.join(missing)}; it needs exactly one entry "
                      f"for each of {_span(positional)}")
    return {doc_ids[i]: answers[p] for i, p in enumerate(positional)}


def _validate_lists(obj: dict[str, Any]) -> str:
    if "better" not in obj:
        raise _Reject("schema", "no 'better' key; the answer must name list \"A\" or \"B\"")
    value = obj["better"]
    if not isinstance(value, str):
        raise _Reject("schema", f"'better' is {_q(value)}; it must be the string \"A\" or \"B\"")
    pick = value.strip().upper()
    if pick not in ("A", "B"):
        raise _Reject("schema", f"'better' is {_q(value)}; it must be \"A\" or \"B\" (no ties, no other lists)")
    return pick


def _tournament_shaped(obj: dict[str, Any]) -> bool:
    return "scores" in obj


def _lists_shaped(obj: dict[str, Any]) -> bool:
    return "better" in obj


def _rubric_shaped(obj: dict[str, Any]) -> bool:
    return any(re.fullmatch(r"doc_\d+", _doc_key(k)) for k in obj)


#: The same shapes read in raw text, to tell an answer object that never closes or cannot be read
#: from a stray brace in prose.
_TEXT_SHAPES: dict[Any, re.Pattern[str]] = {
    _tournament_shaped: re.compile(r"[\"']scores[\"']\s*:"),
    _rubric_shaped: re.compile(r"[\"']\s*doc_\d+\s*[\"']\s*:", re.IGNORECASE),
    _lists_shaped: re.compile(r"[\"']better[\"']\s*:"),
}


def parse_tournament(
    text: str | None, doc_ids: Sequence[str], *, finish_reason: str | None = None, distinct: bool = False
) -> ParseResult:
    """Parse a tournament answer for a window whose documents are ``doc_ids`` (real ids, shown order).

    Returns scores keyed by real doc id, or an invalid result. Tied scores are valid (and noted)
    unless ``distinct`` is true, when they are a ``schema`` error naming the tied ids.

    >>> parse_tournament('{"scores": {"doc_1": 2, "doc_2": 2}}', ["a", "b"], distinct=True).detail
    'scores of doc_1 and doc_2 are both 2; every document needs a distinct score'
    """
    try:
        obj, notes = _decode(text, finish_reason, _tournament_shaped, _TEXT_SHAPES[_tournament_shaped])
        scores, tie = _validate_tournament(obj, doc_ids, distinct)
        if tie is not None:
            notes = (*notes, tie.replace("every document needs", "the prompt asks for"))
        return ParseResult(valid=True, scores=scores, notes=notes)
    except _Reject as r:
        return ParseResult(valid=False, category=r.category, detail=r.detail)


def parse_rubric(
    text: str | None, doc_ids: Sequence[str], n_criteria: int = 5, *, finish_reason: str | None = None
) -> ParseResult:
    """Parse a rubric answer with criteria C1..C``n_criteria`` for the window's ``doc_ids``."""
    try:
        obj, notes = _decode(text, finish_reason, _rubric_shaped, _TEXT_SHAPES[_rubric_shaped])
        return ParseResult(valid=True, criteria=_validate_rubric(obj, doc_ids, n_criteria), notes=notes)
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
        obj, notes = _decode(text, finish_reason, _lists_shaped, _TEXT_SHAPES[_lists_shaped])
        return ParseResult(valid=True, better=_validate_lists(obj), notes=notes)
    except _Reject as r:
        return ParseResult(valid=False, category=r.category, detail=r.detail)


def parse_answer(
    text: str | None,
    *,
    stage: str,
    doc_ids: Sequence[str],
    n_criteria: int = 5,
    finish_reason: str | None = None,
    distinct: bool = False,
) -> ParseResult:
    """Dispatch to :func:`parse_tournament` (``distinct`` applies there), :func:`parse_rubric` or
    :func:`parse_lists` by ``stage``."""
    if stage == "tournament":
        return parse_tournament(text, doc_ids, finish_reason=finish_reason, distinct=distinct)
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


def _value_key(value: Any) -> str:
    """A grade as compared between an answer and a planted object: numbers (and numeric strings) by
    value, anything else by its JSON."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return f"n:{float(value)!r}"
    if isinstance(value, str):
        try:
            return f"n:{float(value.strip())!r}"
        except ValueError:
            return json.dumps(value.strip().upper())
    return _canonical(value)


def _content_key(obj: dict[str, Any], stage: str) -> str | None:
    """What an answer says, without its free text: a tournament's scores, a rubric's criteria (ids
    and criteria names normalised as the validator does). A lists verdict is a single letter, so
    its whole object is compared instead (the letter alone would match half of all answers).
    ``None`` when ``obj`` says nothing of the kind."""
    if stage == "tournament":
        scores = obj.get("scores")
        if not isinstance(scores, dict) or not scores:
            return None
        return _canonical(sorted((_doc_key(str(k)), _value_key(v)) for k, v in scores.items()))
    if stage == "rubric":
        entries = sorted(
            (_doc_key(str(k)), sorted((str(c).strip().upper(), _value_key(x)) for c, x in v["criteria"].items()))
            for k, v in obj.items()
            if isinstance(v, dict) and isinstance(v.get("criteria"), dict)
        )
        return _canonical(entries) if entries else None
    return _canonical(obj)


#: A document can hold a stage's answer only if it holds this word (a cheap test before scanning).
_STAGE_WORD = {"tournament": "scores", "rubric": "criteria"}


@functools.lru_cache(maxsize=4096)  # a document sits in ~14 windows, each asked once or more
def _planted_keys(text: str, stage: str, whole: bool) -> frozenset[str]:
    """Keys of every object written in ``text`` (nested ones too): content keys, or (``whole``) the
    canonical JSON of each object."""
    found = _scan(text, nested=True).found
    if whole:
        return frozenset(_canonical(f.obj) for f in found)
    return frozenset(k for k in (_content_key(f.obj, stage) for f in found) if k is not None)


def echoed_documents(
    text: str | None,
    doc_ids: Sequence[str],
    doc_texts: Sequence[str],
    *,
    stage: str,
    finish_reason: str | None = None,
) -> list[str]:
    """The documents of a window whose text contains the very answer the judge gave.

    A judge does not copy its verdict out of a document it is grading: an answer whose grades equal
    those of an object written inside a document means a planted answer was repeated, i.e. a prompt
    injection worked. The comparison is on what the answer says (tournament: the scores per document;
    rubric: the criteria per document; ids, criteria names and number formats normalised as the
    validator reads them), so a repeated answer is caught even with its own reasoning text; a lists
    answer is compared whole. The answer is the one the parser uses (the final one). Parsing does not
    depend on this check (an answer for documents outside the window is refused whatever its origin);
    it is reported, so the window and the document can be inspected.

    ``doc_texts`` may hold corpus values (:class:`rcp_jax.judging.prompts.pages.Document`, a page image with its text):
    their text is read; a page image holds no text answer.

    Returns the ids (from ``doc_ids``) of the documents holding the answer, in window order.
    """
    doc_texts = [doc_text(t) for t in doc_texts]
    if not any("{" in t for t in doc_texts):
        return []
    shape = _SHAPES.get(stage)
    try:
        obj, _ = _decode(text, finish_reason, shape, _TEXT_SHAPES.get(shape))
    except _Reject:
        return []
    answer = _content_key(obj, stage)
    whole = answer is None
    if whole:
        answer = _canonical(obj)
    word = None if whole else _STAGE_WORD.get(stage)
    return [
        d
        for d, t in zip(doc_ids, doc_texts, strict=True)
        if "{" in t and (word is None or word in t.lower()) and answer in _planted_keys(t, stage, whole)
    ]
