"""The judging records and their durable home (imports only ``rcp_jax.judging.errors``).

- :mod:`.records`: :class:`Window` (what a judge is asked), :class:`Judgement` (what it answered),
  :class:`JudgeFamily`, :func:`record_id`, the stages; plain frozen records that round-trip through JSON.
- :mod:`.jsonl`: :class:`JudgementStore`, :func:`read_judgements`: the append-only, resumable JSONL store.

The public names are in :mod:`rcp_jax.judging`; this ``__init__`` imports nothing.
"""
