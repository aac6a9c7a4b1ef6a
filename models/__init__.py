"""Pure JAX / NumPyro models of rcp-jax: arrays in, parameters and posteriors out.

This package never reads files, never sees query strings and never imports pandas, litellm,
``judging`` or ``rcp_jax`` (a test enforces it).
"""
