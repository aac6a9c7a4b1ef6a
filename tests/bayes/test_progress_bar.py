"""The NUTS progress bar of ``fit_posterior``: phases and, for chains run one after another, the chain."""

from __future__ import annotations

import tqdm.auto

from rcp_jax.bayes.posterior import _progress_bar


def _labels(monkeypatch, reports, *, num_warmup, per_chain):
    shown = []

    class Recording(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "disable": True})

        def set_postfix_str(self, s="", refresh=True):
            shown.append((self.n, s))

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    with _progress_bar(True, "NUTS", num_warmup, per_chain) as report:
        for done, total in reports:
            report(done, total)
    return shown[1:]  # the first is "compiling"


def test_sequential_chains_name_their_chain_and_phase(monkeypatch):
    # 2 chains x (3 warmup + 2 draws), reported one chain after the other
    shown = _labels(monkeypatch, [(i, 10) for i in range(1, 11)], num_warmup=3, per_chain=5)
    assert [s for _, s in shown] == [f"chain 1/2, {p}" for p in ["warmup"] * 3 + ["sampling"] * 2] + \
                                    [f"chain 2/2, {p}" for p in ["warmup"] * 3 + ["sampling"] * 2]


def test_vectorised_chains_report_the_phase_only(monkeypatch):
    # every chain at once: the total is one chain's iterations
    shown = _labels(monkeypatch, [(i, 5) for i in range(1, 6)], num_warmup=3, per_chain=5)
    assert [s for _, s in shown] == ["warmup"] * 3 + ["sampling"] * 2
