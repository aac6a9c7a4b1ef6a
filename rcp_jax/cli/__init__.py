"""The ``rcp-jax`` command line: :func:`main` is the console script; one module per verb.

:mod:`rcp_jax.cli.app` builds the parser from the verb modules ``rcp_jax.cli.<verb>`` (each has ``NAME``,
``HELP``, ``add_arguments(parser)`` and ``run(args)``), maps errors to exit codes and sets process-level
JAX options. ``_common``, ``_judge_options`` and ``_paths`` are helpers the verbs share. Importing this
package (and ``rcp-jax --help``) loads no numeric stack: the verbs import it inside ``run``.
"""

from rcp_jax.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
