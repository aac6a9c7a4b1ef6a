"""Batch judging: each phase's windows as one batch (a provider's batch API, or offline files for an engine such as
``vllm run-batch``), journaled in the store so a killed run resumes without submitting paid work twice.

Modules: ``lines`` (the OpenAI batch JSONL formats), ``journal`` (``<store>/batches.jsonl``), ``backends``
(``ProviderBatches`` through litellm, ``FileBatches``), ``ingest`` (results into the store through the online
parser), ``runner`` (``judge_windows_batch``). Like the other subpackages of ``judging``, this ``__init__`` imports
nothing; :mod:`rcp_jax.judging` names the public surface.
"""
