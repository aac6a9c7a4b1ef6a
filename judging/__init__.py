"""The asynchronous LLM judging layer of rcp-jax (no JAX imported here)."""
