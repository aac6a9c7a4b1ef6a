"""One module per ``rcp-jax`` verb (see :mod:`rcp_jax.cli`)."""
