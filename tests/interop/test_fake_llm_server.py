"""The fake LLM server renders one neutral script in both wire formats and
logs every request; other suites (loop, ask, kernel) rely on this."""

import http.client
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "tools", "fake_llm_server.py")


@pytest.fixture
def server(tmp_path):
    procs = []

    def start(script):
        path = tmp_path / "script.json"
        log = tmp_path / "log.jsonl"
        path.write_text(json.dumps(script))
        p = subprocess.Popen([sys.executable, SERVER, "--script", str(path),
                              "--log", str(log)], stdout=subprocess.PIPE)
        procs.append(p)
        port = int(p.stdout.readline())
        return port, log

    yield start
    for p in procs:
        p.terminate()
        p.wait()


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", path, json.dumps(body),
              {"Content-Type": "application/json", "x-api-key": "k"})
    r = c.getresponse()
    return r.status, dict(r.getheaders()), r.read().decode()


def sse_data(text):
    return [json.loads(line[6:]) for line in text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


REPLY = {"reply": {"text": "Hello", "split": 2,
                   "tool_calls": [{"name": "python",
                                   "arguments": {"code": "1+1"}}],
                   "usage": {"input_tokens": 3, "output_tokens": 4}}}


def test_openai_stream_reassembles_to_the_reply(server):
    port, log = server([REPLY])
    status, headers, body = post(port, "/v1/chat/completions",
                                 {"model": "m", "stream": True})
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    chunks = sse_data(body)
    text = "".join(c["choices"][0]["delta"].get("content", "")
                   for c in chunks if c["choices"])
    args = "".join(tc["function"]["arguments"]
                   for c in chunks if c["choices"]
                   for tc in c["choices"][0]["delta"].get("tool_calls", []))
    assert text == "Hello"
    assert json.loads(args) == {"code": "1+1"}
    assert chunks[-1]["usage"]["prompt_tokens"] == 3
    assert body.rstrip().endswith("data: [DONE]")


def test_anthropic_whole_body_has_tool_use_input(server):
    port, log = server([REPLY])
    status, _, body = post(port, "/v1/messages", {"model": "m"})
    msg = json.loads(body)
    assert status == 200 and msg["stop_reason"] == "tool_use"
    assert msg["content"][1] == {"type": "tool_use", "id": "toolu_fake_0",
                                 "name": "python", "input": {"code": "1+1"}}


def test_requests_are_logged_and_exhaustion_is_clear(server):
    port, log = server([{"status": 429, "headers": {"retry-after": "1"},
                         "body": {"error": {"message": "slow"}}}])
    status, headers, _ = post(port, "/v1/messages", {"model": "m", "n": 1})
    assert status == 429 and headers["retry-after"] == "1"
    status, _, body = post(port, "/v1/messages", {"model": "m", "n": 2})
    assert status == 418 and "script exhausted" in body
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["body"]["n"] for x in lines] == [1, 2]
    assert lines[0]["path"] == "/v1/messages"
    assert lines[0]["headers"]["x-api-key"] == "k"


def test_drop_and_cut_end_the_connection_early(server):
    port, _ = server([{"drop": True},
                      {"body": "x" * 100, "cut_after_bytes": 10}])
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        post(port, "/v1/chat/completions", {})
    with pytest.raises(http.client.IncompleteRead):
        post(port, "/v1/chat/completions", {})
