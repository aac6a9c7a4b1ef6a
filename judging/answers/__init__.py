"""A judge's answers: parsed, summarised when invalid, re-parsed from a store.

- :mod:`.parse`: :func:`parse_answer` and the parsers of each stage, :data:`PARSER_VERSION`.
- :mod:`.verdict`: invalid answers by category with an example and what to try.
- :mod:`.reparse`: :func:`reparse_store`: a store's raw answers through the current parser, into a new store.

Imports ``rcp_jax.judging.errors``, ``rcp_jax.judging.store`` and ``rcp_jax.judging.prompts``. The public
names are in :mod:`rcp_jax.judging`; this ``__init__`` imports nothing.
"""
