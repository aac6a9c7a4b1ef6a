"""Windows (what the judge is asked) and judgements (what it answered), as plain frozen records.

A :class:`Window` is one judge call's worth of documents for one query. A :class:`Judgement` is one
answer attempt for one window by one judge *family* (model + prompt hash + parser version + decoding
settings), valid or not, with everything needed to audit and re-parse it later. Both round-trip
through JSON (``to_dict`` / ``from_dict``) exactly as the store writes them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rcp_jax.judging.errors import JudgeInputError

Stage = Literal["tournament", "rubric", "lists"]
STAGES: tuple[str, ...] = ("tournament", "rubric", "lists")

#: Why an answer was rejected. ``None`` on a valid judgement.
INVALID_CATEGORIES: tuple[str, ...] = ("no_json", "invalid_json", "schema", "incomplete", "truncated", "refused")
#: Invalid categories the parser never gives: the endpoint's reply itself held no answer (an empty or null
#: ``choices`` list, a choice without a message, ``content: null`` without tool calls).
RESPONSE_CATEGORIES: tuple[str, ...] = ("malformed_response",)


def content_hash(payload: Any, n_hex: int = 16) -> str:
    """Hex digest (``n_hex`` characters) of the canonical JSON of ``payload`` (sorted keys, no spaces)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n_hex]


@dataclass(frozen=True)
class Window:
    """One call's worth of documents for one query.

    Attributes
    ----------
    query_id : the query the documents are judged against.
    stage : ``"tournament"`` (listwise scores), ``"rubric"`` (per-document yes/no criteria) or
        ``"lists"`` (which of two ranked lists serves the query better).
    phase : the schedule's phase name (e.g. ``"round1"``, ``"round1_reversed"``, ``"balanced"``).
    sequence : the window's number within (query, stage, phase); any int the schedule likes.
    doc_ids : the documents in the order the judge sees them (``doc_1`` is ``doc_ids[0]``); distinct.
        A ``"lists"`` window holds list A then list B (``doc_ids[:split]`` and ``doc_ids[split:]``),
        each in rank order and distinct within itself; a document may appear in both lists.
    split : ``"lists"`` only: the length of list A (``1 <= split < len(doc_ids)``); 0 for other stages.
    images : a window showing page images: the hash of their bytes and the image limits
        (:func:`rcp_jax.judging.prompts.pages.window_images_hash`, set by :func:`rcp_jax.judging.judge_windows`), so a changed image
        is a new window and a moved file the same one; ``""`` for text windows. Part of the record id, not of
        window equality (the schedule's window and the stamped one are the same window).
    """

    query_id: str
    stage: str
    phase: str
    sequence: int
    doc_ids: tuple[str, ...]
    split: int = 0
    images: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "doc_ids", tuple(str(d) for d in self.doc_ids))
        object.__setattr__(self, "query_id", str(self.query_id))
        object.__setattr__(self, "phase", str(self.phase))
        if self.stage not in STAGES:
            raise JudgeInputError(
                f"window {self.query_id}/{self.phase}/{self.sequence}: stage {self.stage!r} is not one of {STAGES}"
            )
        if not self.doc_ids:
            raise JudgeInputError(f"window {self.label}: has no documents; a window needs at least one")
        object.__setattr__(self, "split", int(self.split))
        if self.stage == "lists":
            if not 1 <= self.split < len(self.doc_ids):
                raise JudgeInputError(
                    f"window {self.label}: split={self.split} must mark the end of list A inside doc_ids "
                    f"(1 <= split < {len(self.doc_ids)}); both lists need at least one document"
                )
            parts = (self.doc_ids[: self.split], self.doc_ids[self.split :])
        else:
            if self.split != 0:
                raise JudgeInputError(f"window {self.label}: split is only for the 'lists' stage; leave it 0")
            parts = (self.doc_ids,)
        for part in parts:
            if len(set(part)) != len(part):
                dupes = sorted({d for d in part if part.count(d) > 1})
                raise JudgeInputError(
                    f"window {self.label}: documents {dupes} appear more than once"
                    + (" in one list" if self.stage == "lists" else "")
                    + "; ids must be distinct"
                )

    @property
    def lists(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``"lists"`` windows: (list A, list B) as shown; raises for other stages."""
        if self.stage != "lists":
            raise JudgeInputError(f"window {self.label}: only a 'lists' window holds two lists")
        return self.doc_ids[: self.split], self.doc_ids[self.split :]

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. ``q12/tournament/round1#3``, used in messages."""
        return f"{self.query_id}/{self.stage}/{self.phase}#{self.sequence}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query_id": self.query_id,
            "stage": self.stage,
            "phase": self.phase,
            "sequence": self.sequence,
            "doc_ids": list(self.doc_ids),
        }
        if self.split:  # only two-list windows carry it, so other records keep their exact form
            out["split"] = self.split
        if self.images:  # likewise only windows showing page images
            out["images"] = self.images
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Window:
        return cls(
            query_id=data["query_id"],
            stage=data["stage"],
            phase=data["phase"],
            sequence=int(data["sequence"]),
            doc_ids=tuple(data["doc_ids"]),
            split=int(data.get("split", 0)),
            images=str(data.get("images", "")),
        )


@dataclass(frozen=True)
class JudgeFamily:
    """Everything that changes what a judge answers: records of one family are interchangeable.

    Attributes
    ----------
    model : the model string (litellm form, e.g. ``"openai/gpt-4o-mini"``, or ``"simulated"``).
    prompt_hash : :attr:`rcp_jax.judging.prompts.template.PromptTemplate.hash` of the stage's template.
    parser_version : :data:`rcp_jax.judging.answers.parse.PARSER_VERSION` that validated the answer.
    decoding : temperature, max tokens, structured-output mode, text budget, ... (JSON-able values).
    n_criteria : K of a rubric family (criteria C1..CK); 0 for a tournament family.
    rubric : a rubric family judged with a rubric file other than the built-in one: its summary
        ``{"name", "hash", "criteria": [names], "source"}`` (:meth:`rcp_jax.judging.prompts.rubric.Rubric.summary`), whose
        ``hash`` enters the family id; ``None`` otherwise (the built-in rubric's families keep the ids they had
        before rubric files existed; :func:`rcp_jax.judging.prompts.rubric.family_rubric` names their rubric).
    """

    model: str
    prompt_hash: str
    parser_version: str
    decoding: Mapping[str, Any] = field(default_factory=dict)
    n_criteria: int = 0
    rubric: Mapping[str, Any] | None = None

    @property
    def family_id(self) -> str:
        """16-hex content hash of the whole family."""
        return content_hash(self._payload())

    def _payload(self) -> dict[str, Any]:
        out = {
            "model": self.model,
            "prompt_hash": self.prompt_hash,
            "parser_version": self.parser_version,
            "decoding": dict(self.decoding),
            "n_criteria": self.n_criteria,
        }
        if self.rubric:  # only rubric-file families carry it, so other families keep their ids
            out["rubric"] = self.rubric["hash"]
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {**self._payload(), "family_id": self.family_id}
        if self.rubric:
            out["rubric"] = dict(self.rubric)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeFamily:
        return cls(
            model=data["model"],
            prompt_hash=data["prompt_hash"],
            parser_version=str(data["parser_version"]),
            decoding=dict(data.get("decoding", {})),
            n_criteria=int(data.get("n_criteria", 0)),
            rubric=dict(data["rubric"]) if data.get("rubric") else None,
        )


def record_id(family: JudgeFamily, window: Window) -> str:
    """Content hash of (family, query, stage, phase, sequence, documents[, split]): the key of a window's
    answers.

    Every attempt at the same window by the same family shares this id; the store counts a window done
    once one record with this id is valid. The split of a two-list window and the image hash of a window
    showing page images (:attr:`Window.images`) enter the hash; other windows hash exactly as before they
    existed.
    """
    payload: dict[str, Any] = {
        "family": family.family_id,
        "query_id": window.query_id,
        "stage": window.stage,
        "phase": window.phase,
        "sequence": window.sequence,
        "doc_ids": list(window.doc_ids),
    }
    if window.split:
        payload["split"] = window.split
    if window.images:
        payload["images"] = window.images
    return content_hash(payload)


@dataclass(frozen=True)
class Usage:
    """Tokens and money of one call (or of a ledger). ``cost_usd`` is ``None`` when unknown.

    ``cached_tokens`` is the part of ``prompt_tokens`` the provider served from its prompt cache (OpenAI's
    ``usage.prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens`` through litellm),
    priced at the model's cached-input rate; 0 when none or not reported (then not written, so records without
    it keep their exact stored form).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    cached_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                               "cost_usd": self.cost_usd}
        if self.cached_tokens:
            out["cached_tokens"] = self.cached_tokens
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage:
        data = data or {}
        return cls(int(data.get("prompt_tokens", 0)), int(data.get("completion_tokens", 0)), data.get("cost_usd"),
                   int(data.get("cached_tokens", 0) or 0))


@dataclass(frozen=True)
class Judgement:
    """One answer attempt for one window, as stored (one JSONL line).

    Attributes
    ----------
    record_id : :func:`record_id` of (family, window); shared by every attempt at the window.
    family : the judge family that answered.
    window : the window asked.
    valid : whether the answer passed strict validation.
    invalid_category : one of :data:`INVALID_CATEGORIES` or :data:`RESPONSE_CATEGORIES` when invalid, else
        ``None``.
    invalid_detail : a one-line reason when invalid (e.g. ``"doc_3 missing"``), else ``""``.
    scores : tournament only: real doc id -> score in [-5, 5]; ``None`` otherwise or when invalid.
    criteria : rubric only: real doc id -> tuple of K answers in {0, 1} (C1..CK); ``None`` otherwise.
    better : lists only: ``"A"`` or ``"B"``, the list (as shown) the judge prefers; ``None`` otherwise.
    raw_response : the judge's answer text exactly as received (kept so it can be re-parsed).
    finish_reason : the endpoint's finish reason (``"stop"``, ``"length"``, ``"content_filter"``, ...).
    attempts : 1-based number of this answer attempt for the window, counted across runs (a window
        re-asked in a later run continues the count).
    usage : tokens and cost of this call.
    truncated_docs : real doc id -> original length in characters, for documents cut to fit the
        per-window text budget.
    started_at, finished_at : ISO-8601 UTC timestamps of the call.
    transport_retries : how many rate-limit / server-error / timeout retries this call needed.
    flags : warnings about this answer, e.g. ``"echoes_document:<doc id>"`` when the answer repeats an
        answer planted inside that document (a prompt injection); ``()`` for most records, which then
        keep their exact stored form.
    reask : what a re-ask varied to get a different answer than the attempt before, e.g.
        ``{"attempt": 2, "seed": 1, "temperature": 0.2, "repair": "schema: doc_3 missing"}`` (see
        :meth:`judging.LiteLLMJudge.reask_settings`); ``None`` on first attempts and for judges that vary
        nothing (then not written, so those records keep their exact stored form). Not part of the record id.
    served_model : the model the answer actually came from, as the endpoint's reply names it (the response's
        ``model``, e.g. ``"gpt-4o-mini-2024-07-18"`` for a request to ``openai/gpt-4o-mini``); ``None`` when the
        reply names none, for offline judges and in records written before it was kept (then not written).
        Not part of the family or the record id: :mod:`rcp_jax.judging.store.provenance` reports a store whose
        family was answered by several served models.
    system_fingerprint : the reply's ``system_fingerprint`` (the provider's backend configuration) where it
        gives one, else ``None`` (then not written). Providers rotate it; a change is reported, never refused.
    batch : the id of the batch (provider batch API or offline batch file) this answer came from; ``None`` for
        answers of online calls (then not written, so those records keep their exact stored form). Ingesting a
        batch twice stores nothing twice: a record of that batch id is never appended again.
    """

    record_id: str
    family: JudgeFamily
    window: Window
    valid: bool
    invalid_category: str | None
    invalid_detail: str
    scores: Mapping[str, float] | None
    criteria: Mapping[str, tuple[int, ...]] | None
    raw_response: str
    finish_reason: str | None
    attempts: int
    usage: Usage
    truncated_docs: Mapping[str, int]
    started_at: str
    finished_at: str
    transport_retries: int = 0
    better: str | None = None
    flags: tuple[str, ...] = ()
    reask: Mapping[str, Any] | None = None
    served_model: str | None = None
    system_fingerprint: str | None = None
    batch: str | None = None

    def to_dict(self) -> dict[str, Any]:
        crit = None
        if self.criteria is not None:
            crit = {d: {f"C{k + 1}": int(v) for k, v in enumerate(ans)} for d, ans in self.criteria.items()}
        out: dict[str, Any] = {
            "record_id": self.record_id,
            "family": self.family.to_dict(),
            "window": self.window.to_dict(),
            "valid": self.valid,
            "invalid_category": self.invalid_category,
            "invalid_detail": self.invalid_detail,
            "scores": dict(self.scores) if self.scores is not None else None,
            "criteria": crit,
            "raw_response": self.raw_response,
            "finish_reason": self.finish_reason,
            "attempts": self.attempts,
            "usage": self.usage.to_dict(),
            "truncated_docs": dict(self.truncated_docs),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "transport_retries": self.transport_retries,
        }
        if self.window.stage == "lists":  # tournament and rubric lines keep their exact form
            out["better"] = self.better
        if self.flags:
            out["flags"] = list(self.flags)
        if self.reask:
            out["reask"] = dict(self.reask)
        if self.served_model is not None:
            out["served_model"] = self.served_model
        if self.system_fingerprint is not None:
            out["system_fingerprint"] = self.system_fingerprint
        if self.batch:
            out["batch"] = self.batch
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Judgement:
        crit = data.get("criteria")
        criteria = None
        if crit is not None:
            criteria = {
                d: tuple(int(ans[k]) for k in sorted(ans, key=lambda c: int(c[1:]))) for d, ans in crit.items()
            }
        scores = data.get("scores")
        return cls(
            record_id=data["record_id"],
            family=JudgeFamily.from_dict(data["family"]),
            window=Window.from_dict(data["window"]),
            valid=bool(data["valid"]),
            invalid_category=data.get("invalid_category"),
            invalid_detail=data.get("invalid_detail", ""),
            scores={d: float(s) for d, s in scores.items()} if scores is not None else None,
            criteria=criteria,
            raw_response=data.get("raw_response", ""),
            finish_reason=data.get("finish_reason"),
            attempts=int(data.get("attempts", 1)),
            usage=Usage.from_dict(data.get("usage")),
            truncated_docs=dict(data.get("truncated_docs", {})),
            started_at=data.get("started_at", ""),
            finished_at=data.get("finished_at", ""),
            transport_retries=int(data.get("transport_retries", 0)),
            better=data.get("better"),
            flags=tuple(data.get("flags") or ()),
            reask=dict(data["reask"]) if data.get("reask") else None,
            served_model=data.get("served_model"),
            system_fingerprint=data.get("system_fingerprint"),
            batch=data.get("batch") or None,
        )


def windows_from_dicts(rows: Sequence[Mapping[str, Any]]) -> list[Window]:
    """Build windows from JSON-like rows with keys query_id, stage, phase, sequence, doc_ids[, split]."""
    return [Window.from_dict(r) for r in rows]
