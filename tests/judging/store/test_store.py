"""Records and the append-only store: ids, round trips, durability rules, torn lines, the writer lock, re-parse."""

from __future__ import annotations

import json
import logging

import pytest

from rcp_jax.judging import (
    JudgeFamily,
    Judgement,
    JudgementStore,
    StoreError,
    StoreLockedError,
    Usage,
    Window,
    read_judgements,
    record_id,
    reparse_store,
)
from rcp_jax.judging.answers.parse import PARSER_VERSION
from rcp_jax.judging.errors import JudgeInputError

FAMILY = JudgeFamily(model="m", prompt_hash="p" * 16, parser_version=PARSER_VERSION, decoding={"temperature": 0.0})


def judgement(window: Window, *, valid: bool = True, attempt: int = 1, raw: str | None = None) -> Judgement:
    scores = {d: float(i) for i, d in enumerate(window.doc_ids)} if valid else None
    if raw is None:
        raw = json.dumps({"scores": {f"doc_{i + 1}": float(i) for i in range(len(window.doc_ids))}}) if valid else "nope"
    return Judgement(
        record_id=record_id(FAMILY, window),
        family=FAMILY,
        window=window,
        valid=valid,
        invalid_category=None if valid else "no_json",
        invalid_detail="" if valid else "no JSON object in the answer",
        scores=scores,
        criteria=None,
        raw_response=raw,
        finish_reason="stop",
        attempts=attempt,
        usage=Usage(100, 20, 0.001),
        truncated_docs={},
        started_at="2025-01-01T00:00:00.000+00:00",
        finished_at="2025-01-01T00:00:01.000+00:00",
    )


W1 = Window("q1", "tournament", "round1", 0, ("a", "b", "c"))
W2 = Window("q1", "tournament", "round1", 1, ("c", "b", "a"))


def test_window_validation():
    with pytest.raises(JudgeInputError, match="stage"):
        Window("q", "pointwise", "p", 0, ("a",))
    with pytest.raises(JudgeInputError, match="more than once"):
        Window("q", "rubric", "p", 0, ("a", "a"))
    with pytest.raises(JudgeInputError, match="no documents"):
        Window("q", "rubric", "p", 0, ())


def test_record_id_depends_on_every_part():
    base = record_id(FAMILY, W1)
    assert base == record_id(FAMILY, Window("q1", "tournament", "round1", 0, ["a", "b", "c"]))
    others = [
        record_id(FAMILY, W2),
        record_id(FAMILY, Window("q2", "tournament", "round1", 0, ("a", "b", "c"))),
        record_id(FAMILY, Window("q1", "rubric", "round1", 0, ("a", "b", "c"))),
        record_id(FAMILY, Window("q1", "tournament", "round2", 0, ("a", "b", "c"))),
        record_id(FAMILY, Window("q1", "tournament", "round1", 0, ("b", "a", "c"))),
        record_id(JudgeFamily("m2", FAMILY.prompt_hash, PARSER_VERSION, FAMILY.decoding), W1),
        record_id(JudgeFamily("m", "q" * 16, PARSER_VERSION, FAMILY.decoding), W1),
        record_id(JudgeFamily("m", FAMILY.prompt_hash, "999", FAMILY.decoding), W1),
        record_id(JudgeFamily("m", FAMILY.prompt_hash, PARSER_VERSION, {"temperature": 0.7}), W1),
    ]
    assert base not in others and len(set(others)) == len(others)


def test_judgement_round_trips_through_json():
    j = judgement(W1)
    rub = Judgement(**{**j.__dict__, "scores": None, "criteria": {"a": (1, 0, 1, 0, 0), "b": (0, 0, 0, 0, 0), "c": (1, 1, 1, 1, 1)}})
    for x in (j, judgement(W2, valid=False, attempt=2), rub):
        assert Judgement.from_dict(json.loads(json.dumps(x.to_dict()))) == x


def test_append_is_durable_and_indexed(tmp_path):
    with JudgementStore(tmp_path) as store:
        store.append(judgement(W1, valid=False, attempt=1))
        assert not store.is_done("tournament", record_id(FAMILY, W1))
        store.append(judgement(W1, attempt=2))
        assert store.is_done("tournament", record_id(FAMILY, W1))
        assert store.count("tournament") == 2
    lines = (tmp_path / "tournament.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["record_id"] == record_id(FAMILY, W1) for x in lines)
    # reopened: the index is rebuilt from the file
    with JudgementStore(tmp_path) as store:
        assert store.is_done("tournament", record_id(FAMILY, W1))
        assert not store.is_done("tournament", record_id(FAMILY, W2))
    assert [j.valid for j in read_judgements(tmp_path, "tournament")] == [False, True]
    assert len(read_judgements(tmp_path, "tournament", valid_only=True)) == 1


def test_writing_a_closed_store_is_refused(tmp_path):
    with pytest.raises(StoreError, match="not open"):
        JudgementStore(tmp_path).append(judgement(W1))


def test_second_writer_is_locked_out(tmp_path):
    with JudgementStore(tmp_path):
        with pytest.raises(StoreLockedError, match=str(tmp_path)):
            JudgementStore(tmp_path).open()
    with JudgementStore(tmp_path):  # released on close
        pass


def test_torn_last_line_is_skipped_by_readers_and_moved_by_writers(tmp_path, caplog):
    with JudgementStore(tmp_path) as store:
        store.append(judgement(W1))
    path = tmp_path / "tournament.jsonl"
    full = json.dumps(judgement(W2).to_dict())
    with open(path, "a") as f:
        f.write(full[: len(full) // 2])  # a crash in the middle of a write
    with caplog.at_level(logging.WARNING, logger="rcp_jax.judging.store.jsonl"):
        assert [j.window for j in read_judgements(tmp_path, "tournament")] == [W1]
    assert "torn" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rcp_jax.judging.store.jsonl"):
        with JudgementStore(tmp_path) as store:
            store.append(judgement(W2))
    assert "torn" in caplog.text
    assert (tmp_path / "tournament.jsonl.torn").read_text() == full[: len(full) // 2] + "\n"
    assert [j.window for j in read_judgements(tmp_path, "tournament")] == [W1, W2]


def test_a_bad_line_in_the_middle_is_corruption(tmp_path):
    with JudgementStore(tmp_path) as store:
        store.append(judgement(W1))
    path = tmp_path / "tournament.jsonl"
    path.write_text("{broken\n" + path.read_text())
    with pytest.raises(StoreError, match="line 1"):
        read_judgements(tmp_path, "tournament")


def test_async_appends_share_fsyncs_and_all_land(tmp_path, monkeypatch):
    import asyncio
    import os

    from rcp_jax.judging.store import jsonl as store_module

    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(store_module.os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    windows = [Window("q", "tournament", "p", i, ("a", "b")) for i in range(50)]

    async def go(store):
        await asyncio.gather(*(store.append_async(judgement(w)) for w in windows))

    with JudgementStore(tmp_path) as store:
        asyncio.run(go(store))
        assert all(store.is_done("tournament", record_id(FAMILY, w)) for w in windows)
    assert len(read_judgements(tmp_path, "tournament")) == 50
    assert len(fsyncs) >= 1 and len(fsyncs) < 50  # every record fsync'd before acknowledged, in shared groups


def test_reparse_into_a_new_store(tmp_path):
    src, dst = tmp_path / "old", tmp_path / "new"
    # an answer an older, stricter parser rejected but the current one reads (wrapped in a fence)
    fenced = "```json\n" + json.dumps({"scores": {"doc_1": 1, "doc_2": 0, "doc_3": -1}}) + "\n```"
    old_family = JudgeFamily("m", "p" * 16, "0", {})
    old = judgement(W1, valid=False, raw=fenced)
    old = Judgement(**{**old.__dict__, "family": old_family, "record_id": record_id(old_family, W1)})
    still_bad = Judgement(**{**judgement(W2, valid=False).__dict__, "family": old_family, "record_id": record_id(old_family, W2)})
    with JudgementStore(src) as store:
        store.append(old)
        store.append(still_bad)
    report = reparse_store(src, dst)
    assert report.records == 2 and report.valid_windows_before == 0 and report.valid_windows_after == 1
    new = read_judgements(dst, "tournament")
    assert [j.valid for j in new] == [True, False]
    assert new[0].scores == {"a": 1.0, "b": 0.0, "c": -1.0}
    assert new[0].family.parser_version == PARSER_VERSION and new[0].record_id != old.record_id
    assert len(read_judgements(src, "tournament")) == 2  # the source is untouched
    with pytest.raises(StoreError, match="same folder"):
        reparse_store(src, src)
