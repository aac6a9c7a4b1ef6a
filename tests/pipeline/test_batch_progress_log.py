"""A batch phase judged where stderr is not a terminal (a job writing a log): the wait shows as log lines."""

from __future__ import annotations

from rcp_jax import pipeline
from rcp_jax.judging.batch.runner import BatchProgress


def _at(status: str, completed: int, elapsed: float, batch_id: str = "batch_1") -> BatchProgress:
    return BatchProgress(phase="round1", round=1, batch_id=batch_id, status=status, total=40, completed=completed,
                         failed=0, elapsed_s=elapsed, windows=40, cached=0, valid=0, calls=0)


def test_a_log_line_per_status_change_and_at_most_every_few_minutes(monkeypatch):
    lines: list[str] = []
    bar = pipeline._BatchProgress(True, "round 1", lines.append)  # pytest's stderr is not a terminal: no bar drawn
    bar(_at("validating", 0, 1.0))
    bar(_at("in_progress", 10, 65.0))
    bar(_at("in_progress", 20, 125.0))  # the same status within BATCH_LOG_SECONDS: no line
    monkeypatch.setattr(pipeline, "BATCH_LOG_SECONDS", 0.0)
    bar(_at("in_progress", 30, 3725.0))  # the interval has passed: a line
    bar(_at("completed", 40, 3800.0))
    bar.close()
    assert len(lines) == 4
    assert lines[1] == "round 1: batch batch_1 in_progress, 10 of 40 requests done, 0 failed, 0:01:05 since it was created"
    assert "1:02:05" in lines[2] and lines[3].startswith("round 1: batch batch_1 completed, 40 of 40")


def test_no_log_lines_when_progress_is_off():
    lines: list[str] = []
    bar = pipeline._BatchProgress(False, "round 1", lines.append)
    bar(_at("in_progress", 10, 65.0))
    assert lines == []
