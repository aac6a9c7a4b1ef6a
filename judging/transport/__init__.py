"""How a judge's calls reach a model: litellm endpoints, worker processes, the event loop.

- :mod:`.client`: :class:`LiteLLMJudge`: any litellm model string, one endpoint or several.
- :mod:`.endpoints`: :class:`EndpointPool`: spreads calls over endpoints, benches failing ones.
- :mod:`.procs`: :class:`ProcessJudge`: a judge's calls spread over worker processes.
- :mod:`.server_info`: what an OpenAI-compatible server says about itself (context size).
- :mod:`.schema`: the JSON schema of an answer, as a provider's ``response_format``.
- :mod:`.redaction`: secrets removed from text before it reaches a message, a log line or a record.
- :mod:`.loop`: :func:`run`: coroutines from synchronous code, stoppable by Ctrl-C and SIGTERM.

Imports ``rcp_jax.judging.judge`` and the subpackages below it (``store``, ``prompts``, ``answers``). The
public names are in :mod:`rcp_jax.judging`; this ``__init__`` imports nothing.
"""
