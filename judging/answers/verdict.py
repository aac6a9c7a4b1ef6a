"""Invalid answers by category, one example, and what to try: the words a stuck user reads.

Used by :func:`rcp_jax.judging.judge_windows` (the early-stop verdict, :class:`judging.JudgeVerdictError`), by
``rcp-jax judge`` (its closing summary) and by ``rcp-jax fit`` (its refusal of a store without valid
answers). Everything here reads stored :class:`judging.Judgement` records; nothing calls a judge.

Example::

    from rcp_jax.judging.answers.verdict import summarise_store
    print(summarise_store("rcp_runs/store").describe())
    # 12 invalid answers of 14 (no_json 9, truncated 3); 4 windows still without a valid answer
    # example (window q1/tournament/round1#0, attempt 3, no_json: no JSON object found): 'Sure! Here ...'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rcp_jax.judging.store.records import STAGES, Judgement

#: Characters of an example raw answer shown in messages.
EXAMPLE_CHARS = 240

#: What to try, per invalid category (CLI flags; the Python names are the same without dashes).
ADVICE: Mapping[str, str] = {
    "no_json": "the model wrote no JSON object: a larger or instruction-tuned model, or constrain it with "
               "--structured-output json_schema (hosted APIs, vLLM, SGLang) or json_object_schema (llama.cpp)",
    "invalid_json": "the JSON did not parse: constrain it with --structured-output json_schema / json_object_schema, "
                    "or a larger model",
    "schema": "the JSON had the wrong shape or values out of range: --structured-output json_schema (or "
              "json_object_schema on llama.cpp) makes the server enforce the shape; else a larger model",
    "incomplete": "documents were missing from the answer: a larger model, or structured output (the schema "
                  "requires every document)",
    "truncated": "the answer ran out of tokens: raise --max-tokens (and the server's context to match), or a model "
                 "that reasons more briefly",
    "refused": "the provider's content filter refused the window: check the documents, or another model",
    "malformed_response": "the server's reply held no answer at all (no choices / no message / empty content): "
                          "check the server's log; often an unsupported option in --extra-params or "
                          "--structured-output (try --structured-output none)",
}


@dataclass(frozen=True)
class InvalidSummary:
    """Invalid answers of a set of records.

    Attributes
    ----------
    answers : records (answer attempts) looked at.
    invalid : invalid ones among them.
    by_category : category -> count of invalid answers, most frequent first.
    windows_without_valid : windows (record ids) that have answers but none valid.
    example : the most recent invalid answer of the most frequent category, as
        ``{"window", "attempt", "category", "detail", "raw"}`` (raw truncated to :data:`EXAMPLE_CHARS`);
        ``None`` when nothing is invalid.
    """

    answers: int = 0
    invalid: int = 0
    by_category: Mapping[str, int] = field(default_factory=dict)
    windows_without_valid: int = 0
    example: Mapping[str, Any] | None = None

    def categories_text(self) -> str:
        """e.g. ``"no_json 9, truncated 3"``."""
        return ", ".join(f"{c} {n}" for c, n in self.by_category.items())

    def describe(self) -> str:
        """Two lines: counts by category (and windows still without a valid answer), then one example."""
        if not self.invalid:
            return f"no invalid answers among {self.answers}"
        lines = [f"{self.invalid} invalid answer(s) of {self.answers} ({self.categories_text()})"
                 + (f"; {self.windows_without_valid} window(s) still without a valid answer"
                    if self.windows_without_valid else "")]
        if self.example is not None:
            e = self.example
            lines.append(f"example (window {e['window']}, attempt {e['attempt']}, {e['category']}"
                         + (f": {e['detail']}" if e["detail"] else "") + f"): {e['raw']!r}")
        return "\n".join(lines)

    def advice(self) -> list[str]:
        """One line of what to try per category seen, most frequent first."""
        return [f"{c}: {ADVICE[c]}" for c in self.by_category if c in ADVICE]

    def to_dict(self) -> dict[str, Any]:
        return {"answers": self.answers, "invalid": self.invalid, "by_category": dict(self.by_category),
                "windows_without_valid": self.windows_without_valid, "example": self.example}


def truncate(text: str, n: int = EXAMPLE_CHARS) -> str:
    """``text`` cut to ``n`` characters, with a marker saying how much was cut."""
    return text if len(text) <= n else f"{text[:n]}... [{len(text) - n} more characters]"


def summarise(records: Iterable[Judgement]) -> InvalidSummary:
    """:class:`InvalidSummary` of ``records`` (any stages, any order)."""
    records = list(records)
    invalid = [r for r in records if not r.valid]
    counts = Counter(r.invalid_category or "unknown" for r in invalid)
    valid_ids = {r.record_id for r in records if r.valid}
    without = {r.record_id for r in invalid} - valid_ids
    example = None
    if invalid:
        top = counts.most_common(1)[0][0]
        r = [x for x in invalid if (x.invalid_category or "unknown") == top][-1]
        example = {"window": r.window.label, "attempt": r.attempts, "category": top,
                   "detail": truncate(r.invalid_detail, 160), "raw": truncate(r.raw_response)}
    return InvalidSummary(
        answers=len(records),
        invalid=len(invalid),
        by_category=dict(counts.most_common()),
        windows_without_valid=len(without),
        example=example,
    )


def summarise_store(folder: str | Path, stages: Iterable[str] = STAGES) -> InvalidSummary:
    """:class:`InvalidSummary` of every record of ``stages`` in the store at ``folder`` (missing files: none)."""
    from rcp_jax.judging.store.jsonl import read_judgements  # noqa: PLC0415 - the store imports records; keep this light

    folder = Path(folder)
    records: list[Judgement] = []
    for stage in stages:
        if (folder / f"{stage}.jsonl").exists():
            records.extend(read_judgements(folder, stage))
    return summarise(records)
