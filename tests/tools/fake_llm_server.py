#!/usr/bin/python3
"""fake_llm_server: a scripted stand-in for OpenAI- and Anthropic-style LLM
servers, on loopback only, for tests.

    /usr/bin/python3 tests/tools/fake_llm_server.py --script S.json --log L.jsonl

It listens on 127.0.0.1 on a free port and prints that port as the first
line of stdout (then flushes), so a test reads one line and connects to
http://127.0.0.1:PORT/v1 (OpenAI: POST /v1/chat/completions) or
http://127.0.0.1:PORT (Anthropic: POST /v1/messages). It exits on SIGTERM,
or by itself after --max-seconds (default 300) as a safety net.

Every request is appended to the log (JSON Lines, one object per request,
written before the response is sent):
    {"n": 0, "method": "POST", "path": "/v1/chat/completions",
     "headers": {"Authorization": "...", ...},   # all headers, as received
     "body": <the request body parsed as JSON, or the raw text>}

SCRIPT FORMAT
The script is a JSON list of responses (or {"responses": [...]}); request
number n (any path) gets response n. Past the end every request gets
HTTP 418 {"error": {"message": "fake_llm_server: script exhausted ..."}}.
Each response is an object with these optional keys:

  status           HTTP status (default 200)
  headers          {"Name": "value"} extra response headers
                   (e.g. {"retry-after": "1"} or {"retry-after-ms": "20"})
  delay            seconds to wait before sending the status line
  drop             true: close the connection without sending a byte
  cut_after_bytes  close the connection abruptly after this many bytes of
                   the body (before chunk framing), mid-chunk if need be

  and one body form:
  body             a string (sent as is) or any JSON value (serialised,
                   content-type application/json); sent with Content-Length
  sse_events       a list sent as text/event-stream, chunked, one chunk per
                   item; an item is
                     {"event": NAME?, "data": STRING-or-JSON, "id": ID?,
                      "retry": MS?}   -> "event: NAME\\ndata: ...\\n\\n"
                                         (multi-line strings become several
                                         data: lines)
                     {"sleep": SECONDS}  pause before the next item
                     "raw text"          sent verbatim
  chunks           a list of raw strings (or {"sleep": s}) sent as separate
                   chunks, for odd framing; content-type from headers or
                   text/event-stream
  reply            a neutral answer rendered in the wire format the request
                   asks for (path ending in /messages = Anthropic, else
                   OpenAI; request body "stream": true = SSE, else one JSON
                   body):
                     {"text": "...",
                      "tool_calls": [{"id"?: "...", "name": "python",
                                      "arguments": "{...}" or {...}}],
                      "usage": {"input_tokens": N, "output_tokens": N},
                      "stop_reason"?: "end" | "tool_use" | "max_tokens",
                      "split": N}   # streamed text/arguments in pieces of
                                    # N characters (default 4)

Only the standard library is used, so any test (C, shell, pytest) can start
it with /usr/bin/python3.
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Script:
    def __init__(self, responses, log_path):
        self.responses = responses
        self.log_path = log_path
        self.lock = threading.Lock()
        self.n = 0

    def take(self, record):
        with self.lock:
            n = self.n
            self.n += 1
            record = dict(n=n, **record)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
            if n < len(self.responses):
                return self.responses[n]
            return {
                "status": 418,
                "body": {"error": {
                    "type": "script_exhausted",
                    "message": "fake_llm_server: script exhausted after %d "
                               "responses" % len(self.responses)}},
            }


def pieces(s, n):
    n = max(1, int(n))
    return [s[i:i + n] for i in range(0, len(s), n)] or [""]


def norm_calls(reply, anthropic):
    out = []
    for i, c in enumerate(reply.get("tool_calls") or []):
        args = c.get("arguments", "{}")
        if not isinstance(args, str):
            args = json.dumps(args)
        out.append({
            "id": c.get("id") or ("toolu_fake_%d" % i if anthropic
                                  else "call_fake_%d" % i),
            "name": c["name"],
            "arguments": args,
        })
    return out


def stop_name(reply, calls, anthropic):
    stop = reply.get("stop_reason") or ("tool_use" if calls else "end")
    if anthropic:
        return {"end": "end_turn", "tool_use": "tool_use",
                "max_tokens": "max_tokens"}.get(stop, stop)
    return {"end": "stop", "tool_use": "tool_calls",
            "max_tokens": "length"}.get(stop, stop)


def render_openai(reply, model, stream):
    calls = norm_calls(reply, False)
    text = reply.get("text", "")
    usage = reply.get("usage") or {}
    u = {"prompt_tokens": usage.get("input_tokens", 0),
         "completion_tokens": usage.get("output_tokens", 0)}
    u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
    finish = stop_name(reply, calls, False)
    if not stream:
        msg = {"role": "assistant", "content": text or None}
        if calls:
            msg["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls]
        return {"body": {"id": "chatcmpl-fake", "object": "chat.completion",
                         "created": 0, "model": model,
                         "choices": [{"index": 0, "message": msg,
                                      "finish_reason": finish}],
                         "usage": u}}
    split = reply.get("split", 4)

    def chunk(delta, finish_reason=None):
        return {"data": {"id": "chatcmpl-fake",
                         "object": "chat.completion.chunk", "created": 0,
                         "model": model,
                         "choices": [{"index": 0, "delta": delta,
                                      "finish_reason": finish_reason}]}}
    ev = [chunk({"role": "assistant", "content": ""})]
    if text:
        ev += [chunk({"content": p}) for p in pieces(text, split)]
    for i, c in enumerate(calls):
        ev.append(chunk({"tool_calls": [{
            "index": i, "id": c["id"], "type": "function",
            "function": {"name": c["name"], "arguments": ""}}]}))
        ev += [chunk({"tool_calls": [{"index": i,
                                      "function": {"arguments": p}}]})
               for p in pieces(c["arguments"], split)]
    ev.append(chunk({}, finish))
    ev.append({"data": {"id": "chatcmpl-fake",
                        "object": "chat.completion.chunk", "created": 0,
                        "model": model, "choices": [], "usage": u}})
    ev.append({"data": "[DONE]"})
    return {"sse_events": ev}


def render_anthropic(reply, model, stream):
    calls = norm_calls(reply, True)
    text = reply.get("text", "")
    usage = reply.get("usage") or {}
    stop = stop_name(reply, calls, True)
    if not stream:
        content = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": c["id"], "name": c["name"],
                     "input": json.loads(c["arguments"] or "{}")}
                    for c in calls]
        return {"body": {"id": "msg_fake", "type": "message",
                         "role": "assistant", "model": model,
                         "content": content, "stop_reason": stop,
                         "stop_sequence": None,
                         "usage": {"input_tokens":
                                   usage.get("input_tokens", 0),
                                   "output_tokens":
                                   usage.get("output_tokens", 0)}}}
    split = reply.get("split", 4)

    def e(kind, **data):
        return {"event": kind, "data": dict(type=kind, **data)}
    ev = [e("message_start", message={
        "id": "msg_fake", "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("input_tokens", 0),
                  "output_tokens": 1}})]
    index = 0
    if text:
        ev.append(e("content_block_start", index=index,
                    content_block={"type": "text", "text": ""}))
        ev.append(e("ping"))
        ev += [e("content_block_delta", index=index,
                 delta={"type": "text_delta", "text": p})
               for p in pieces(text, split)]
        ev.append(e("content_block_stop", index=index))
        index += 1
    for c in calls:
        ev.append(e("content_block_start", index=index,
                    content_block={"type": "tool_use", "id": c["id"],
                                   "name": c["name"], "input": {}}))
        ev += [e("content_block_delta", index=index,
                 delta={"type": "input_json_delta", "partial_json": p})
               for p in pieces(c["arguments"], split)]
        ev.append(e("content_block_stop", index=index))
        index += 1
    ev.append(e("message_delta",
                delta={"stop_reason": stop, "stop_sequence": None},
                usage={"output_tokens": usage.get("output_tokens", 0)}))
    ev.append(e("message_stop"))
    return {"sse_events": ev}


def sse_bytes(item):
    if isinstance(item, str):
        return item.encode()
    out = []
    if "event" in item:
        out.append("event: %s" % item["event"])
    if "id" in item:
        out.append("id: %s" % item["id"])
    if "retry" in item:
        out.append("retry: %s" % item["retry"])
    data = item.get("data", "")
    if not isinstance(data, str):
        data = json.dumps(data)
    out += ["data: " + line for line in data.split("\n")]
    return ("\n".join(out) + "\n\n").encode()


class Cut(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake_llm_server"

    def log_message(self, fmt, *args):  # keep stderr quiet
        pass

    def do_GET(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw.decode("utf-8"))
        except ValueError:
            body = raw.decode("utf-8", "replace")
        resp = self.server.script.take({
            "method": self.command, "path": self.path,
            "headers": dict(self.headers.items()), "body": body})
        self.close_connection = True
        if resp.get("delay"):
            time.sleep(float(resp["delay"]))
        if resp.get("drop"):
            return
        if "reply" in resp:
            anthropic = self.path.rstrip("/").endswith("/messages")
            stream = isinstance(body, dict) and body.get("stream") is True
            model = body.get("model", "") if isinstance(body, dict) else ""
            rendered = (render_anthropic if anthropic else render_openai)(
                resp["reply"], model, stream)
            resp = dict(resp, **rendered)
        self.budget = resp.get("cut_after_bytes")
        try:
            self.respond(resp)
        except (Cut, BrokenPipeError, ConnectionResetError):
            pass

    def send_body(self, data, chunked):
        """Send data (counted against cut_after_bytes); raise Cut when
        the budget runs out, after sending what it allows."""
        cut = False
        if self.budget is not None:
            if len(data) >= self.budget:
                data, cut = data[:self.budget], True
            self.budget -= len(data)
        if chunked:
            # Announce the whole chunk, send maybe less: a real mid-chunk cut.
            full = len(data) if not cut else len(data) + 1
            self.wfile.write(b"%x\r\n" % full + data
                             + (b"" if cut else b"\r\n"))
        else:
            self.wfile.write(data)
        self.wfile.flush()
        if cut:
            self.connection.shutdown(socket.SHUT_RDWR)
            raise Cut()

    def respond(self, resp):
        status = int(resp.get("status", 200))
        headers = dict(resp.get("headers") or {})
        lower = {k.lower() for k in headers}
        self.send_response_only(status)
        if "sse_events" in resp or "chunks" in resp:
            if "content-type" not in lower:
                headers["Content-Type"] = "text/event-stream"
            headers["Transfer-Encoding"] = "chunked"
            headers["Connection"] = "close"
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            items = resp.get("sse_events", resp.get("chunks"))
            for item in items:
                if isinstance(item, dict) and "sleep" in item:
                    time.sleep(float(item["sleep"]))
                    continue
                data = (sse_bytes(item) if "sse_events" in resp
                        else item.encode())
                if data:
                    self.send_body(data, True)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        body = resp.get("body", "")
        if not isinstance(body, str):
            body = json.dumps(body)
            if "content-type" not in lower:
                headers["Content-Type"] = "application/json"
        data = body.encode()
        headers["Content-Length"] = str(len(data))
        headers["Connection"] = "close"
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.send_body(data, False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--script", required=True, help="JSON script file")
    ap.add_argument("--log", help="JSONL file to append requests to")
    ap.add_argument("--max-seconds", type=float, default=300)
    a = ap.parse_args()
    with open(a.script, encoding="utf-8") as f:
        script = json.load(f)
    if isinstance(script, dict):
        script = script.get("responses", [])
    if a.log:
        open(a.log, "w").close()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.script = Script(script, a.log)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    timer = threading.Timer(a.max_seconds, lambda: os._exit(3))
    timer.daemon = True
    timer.start()
    sys.stdout.write("%d\n" % srv.server_address[1])
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
