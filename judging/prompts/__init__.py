"""What a judge reads: prompt templates, rubrics, documents and page images, rendered into chat messages.

- :mod:`.pages`: :class:`Document`, :class:`PageImage`, :class:`ImageLimits`: document texts and page images.
- :mod:`.template`: :class:`PromptTemplate`: one stage's prompt text, checked and hashed.
- :mod:`.rubric`: :class:`Rubric`: rubric files (TOML) and the rubric prompt they make.
- :mod:`.render`: :func:`render_window` (one window into messages, escaped, within a budget) and
  :func:`builtin_template`.

Data: the built-in prompts ``*.txt`` and rubrics ``rubrics/*.toml`` live in this folder (package data).
Imports ``rcp_jax.judging.errors`` and ``rcp_jax.judging.store``. The public names are in
:mod:`rcp_jax.judging`; this ``__init__`` imports nothing.
"""
