"""In process: a crash between an output's complete temp file and its rename leaves
the previous file untouched; a calibration folder left half rewritten by an interrupted save is refused
on load instead of mixing two fits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rcp_jax.data.atomic
from rcp_jax.calibration import Calibration, load_calibration, save_calibration
from rcp_jax.errors import DataError


class Crash(BaseException):
    """Stands for the process dying (a BaseException, like KeyboardInterrupt or SystemExit)."""


def crash_at_rename_of(monkeypatch, name: str) -> None:
    real = rcp_jax.data.atomic.os

    class Os:
        def __getattr__(self, attr):
            return getattr(real, attr)

        def replace(self, src, dst):
            if str(dst).endswith(name):
                raise Crash(dst)
            return real.replace(src, dst)

    monkeypatch.setattr(rcp_jax.data.atomic, "os", Os())


def test_a_crash_before_the_rename_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "per_query.csv"
    rcp_jax.data.atomic.atomic_write_text(path, "old,complete\n1,2\n")
    crash_at_rename_of(monkeypatch, "per_query.csv")
    with pytest.raises(Crash):
        rcp_jax.data.atomic.atomic_write_csv(path, pd.DataFrame({"new": np.arange(10_000)}))
    assert path.read_text() == "old,complete\n1,2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["per_query.csv"]  # the temp file was removed


def calibration(shift: float) -> Calibration:
    queries = pd.DataFrame({"query_id": ["q1", "q2"], "tau": [1.0 + shift, 0.9], "alpha": [0.1, -0.2 + shift],
                            "n_docs": [2, 1], "n_answers": [10, 5], "calibrated": [True, True]})
    documents = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "c"],
                              "theta_bt": [0.5, -0.5, 0.0], "ability": [0.6 + shift, -0.4, -0.2],
                              "gain": [0.7 + shift / 10, 0.3, 0.4], "placements": [1, 1, 1],
                              "count_gain": [0.8, 0.2, 0.4]})
    return Calibration(criteria=["C1", "C2"], gamma=np.array([1.2, 0.8]), beta=np.array([-0.5 + shift, 0.5 - shift]),
                       queries=queries, documents=documents)


def test_an_interrupted_calibration_save_is_refused_not_mixed(tmp_path, monkeypatch):
    folder = tmp_path / "calibration"
    save_calibration(calibration(0.0), folder)
    old = load_calibration(folder)
    assert old.gamma.tolist() == [1.2, 0.8]

    crash_at_rename_of(monkeypatch, "items.json")  # new tables written, the old items.json still there
    with pytest.raises(Crash):
        save_calibration(calibration(0.5), folder)
    monkeypatch.undo()
    with pytest.raises(DataError, match=r"(queries|documents).csv does not match .*items.json.*run `rcp-jax fit` again"):
        load_calibration(folder)

    save_calibration(calibration(0.5), folder)  # the next complete save is read again
    np.testing.assert_array_equal(load_calibration(folder).beta, [0.0, 0.0])


def test_a_damaged_items_file_is_a_data_error(tmp_path):
    folder = tmp_path / "calibration"
    save_calibration(calibration(0.0), folder)
    (folder / "items.json").write_text('{"criteria": ["C1"')
    with pytest.raises(DataError, match="not a calibration's items file"):
        load_calibration(folder)
