"""A store's records in a form two runs of the same judging can be compared by (online against batch, killed
against uninterrupted)."""

from __future__ import annotations

from pathlib import Path

from rcp_jax.judging import read_judgements


def comparable_records(folder: str | Path, *, without_cost: bool = False) -> list[dict]:
    """Every record of the store at ``folder`` as its JSON dict, sorted by (record id, attempt), without what differs
    between two runs of the same answers: the timestamps and the batch id (and the cost with ``without_cost``: a
    batch answer is priced at batch rates)."""
    out = []
    for stage in ("tournament", "rubric"):
        for j in read_judgements(folder, stage):
            d = j.to_dict()
            for k in ("started_at", "finished_at", "batch"):
                d.pop(k, None)
            if without_cost:
                d["usage"].pop("cost_usd", None)
            out.append(d)
    return sorted(out, key=lambda d: (d["record_id"], d["attempts"]))
