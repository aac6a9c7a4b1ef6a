"""Re-reading stored raw answers with the current parser into a new store.

Use after the parser improves: answers that were invalid may become valid (and the reverse) without
asking the judge again. The new records carry the current :data:`rcp_jax.judging.answers.parse.PARSER_VERSION` in
their family: after a version bump, new record ids; after a fix that keeps the version (so that
resumed runs keep their ids, e.g. reading the final answer of a reply rather than the first), the
same ids with the current reading. The source store is only read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from rcp_jax.judging.answers.parse import PARSER_VERSION, parse_answer
from rcp_jax.judging.errors import StoreError
from rcp_jax.judging.store.jsonl import JudgementStore, read_judgements
from rcp_jax.judging.store.records import STAGES, record_id


@dataclass(frozen=True)
class ReparseReport:
    """Counts of a re-parse: records read, windows valid before and after, records written."""

    records: int
    valid_windows_before: int
    valid_windows_after: int
    written: int


def reparse_store(source: str | Path, target: str | Path, *, stages: tuple[str, ...] = STAGES) -> ReparseReport:
    """Re-parse every record of ``source`` with the current parser into the store at ``target``.

    Each window keeps at most one valid record in ``target`` (its first attempt that is valid now);
    invalid attempts before it are kept, attempts after it are dropped.
    """
    if Path(source).resolve() == Path(target).resolve():
        raise StoreError(f"reparse_store: source and target are the same folder ({source}); pick a new target")
    n = before = after = written = 0
    with JudgementStore(target) as out:
        for stage in stages:
            valid_before: set[str] = set()
            for old in read_judgements(source, stage):
                n += 1
                if old.valid:
                    valid_before.add(old.record_id)
                family = replace(old.family, parser_version=PARSER_VERSION)
                rid = record_id(family, old.window)
                if out.is_done(stage, rid):
                    continue
                parsed = parse_answer(
                    old.raw_response,
                    stage=stage,
                    doc_ids=old.window.doc_ids,
                    n_criteria=family.n_criteria or 5,
                    finish_reason=old.finish_reason,
                )
                out.append(
                    replace(
                        old,
                        record_id=rid,
                        family=family,
                        valid=parsed.valid,
                        invalid_category=parsed.category,
                        invalid_detail=parsed.detail,
                        scores=parsed.scores,
                        criteria=parsed.criteria,
                        better=parsed.better,
                    )
                )
                written += 1
            before += len(valid_before)
            after += len(out.valid(stage))
    return ReparseReport(records=n, valid_windows_before=before, valid_windows_after=after, written=written)
