"""What a server reports about its context and slots, read the way llama.cpp and vLLM publish it; never a
reason to block a run."""

from __future__ import annotations

import socket
import time

from rcp_jax.judging.transport.server_info import ServerInfo, context_warning, probe_server


def test_llama_cpp_props_give_context_and_slots(served):
    server = served(props={"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1})
    info = probe_server(server.url, "openai/fake-judge")
    assert (info.context, info.slots) == (2048, 1)
    assert info.source == f"GET {server.url[:-3]}/props"
    top_level = served(props={"n_ctx": 4096, "total_slots": 2})
    assert (probe_server(top_level.url).context, probe_server(top_level.url).slots) == (4096, 2)


def test_vllm_models_give_max_model_len(served):
    server = served(model_info={"max_model_len": 8192})
    info = probe_server(server.url + "/", "hosted_vllm/fake-judge")
    assert (info.context, info.slots) == (8192, None) and "/v1/models" in info.source


def test_a_server_that_reports_nothing_gives_nothing(served):
    server = served()
    assert probe_server(server.url) == ServerInfo()
    assert probe_server(None) == ServerInfo()


def test_an_unreachable_server_gives_nothing_quickly():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    assert probe_server(f"http://127.0.0.1:{port}/v1", timeout=1.0) == ServerInfo()
    assert time.monotonic() - started < 3


def test_context_warning_sizes():
    info = ServerInfo(context=4096, slots=1, source="GET x/props")
    assert context_warning(ServerInfo(), 10**6, 4096) is None  # nothing reported: no warning
    assert context_warning(info, 1000, 2048) is None
    cut = context_warning(info, 1000, 4096, window="q1/tournament/round1#0")
    assert "--max-tokens 2,787" in cut and "4,096" in cut and "q1/tournament/round1#0" in cut
    assert "cannot fit at all" in context_warning(info, 5000, 100)
