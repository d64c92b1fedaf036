#!/usr/bin/env python3
"""`mpirun -np 2 tpsrun serve` end to end, on loopback, bounded in requests and
time: OpenAI's official client (tests/reference/openai_client.mjs, and
tests/reference/responses_client.mjs for the Responses API), Anthropic's
(tests/reference/messages_client.mjs, the Messages API), the web
page in headless chromium (tests/reference/web_page.mjs), every kind of bad
input answered with its status and an OpenAI-style JSON error while the
server goes on serving, what a hostile client tries (nesting, pipelining,
HTTP/1.0, leaving mid-answer, forged metric labels), a load of 200 requests
at 16 at a time, /metrics, a second server on the same port refused, a greedy
answer's log-probabilities the same bits from two ranks as from one, SIGUSR1
to mpirun (SIGTERM to a lone tpsrun) ending every rank gracefully with exit
code 0, the prompt cache's disk tier restoring a prompt after a restart, and
a start-up that fails or is stopped ending promptly.

  serve_e2e_test.py --tpsrun PATH --model FILE --reference DIR [--no-browser]
"""

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

KEY = "test-key"
OTHER_KEY = "other-key"  # a second user's
# A request's line in the server's log (serve/http/request_log.h).
REQUEST_LINE = re.compile(r'^tpsrun: (GET|POST|DELETE) /\S+ \d{3}( \([\w ]+\): prompt \d+ tokens \(\d+ cached\), '
                          r'\d+ generated( \(\d+ drafted\))?(, first token \d+\.\d\d s)?,|:) \d+\.\d\d s; ".*"$')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args, ranks=2, extra=()):
        self.port = free_port()
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo")
        mpirun = ["mpirun", "--oversubscribe", "-np", str(ranks)] if ranks > 1 else []
        self.cmd = mpirun + [args.tpsrun, "serve", "-m", args.model, "--port", str(self.port), "--parallel", "4",
                             "--ctx", "512", "--max-queue", "32", "--api-key", KEY, "--api-key", OTHER_KEY, "-t", "1",
                             *extra]
        self.proc = subprocess.Popen(self.cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True, text=True)
        self.log = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stdout), daemon=True).start()
        self.model_id = os.path.splitext(os.path.basename(args.model))[0]

    def request(self, method, path, body=None, headers=None, key=KEY, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        if key:
            h["Authorization"] = "Bearer " + key
        h.update(headers or {})
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        payload = r.read()
        conn.close()
        return r.status, dict(r.getheaders()), payload

    def wait_ready(self, seconds=120):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.proc.poll() is not None:
                fail("the server exited while starting:\n" + "".join(self.log))
            try:
                status, _, body = self.request("GET", "/health", timeout=5)
                if status == 200:
                    return
                if status == 503:
                    assert json.loads(body)["error"]["message"] == "Loading model"
            except OSError:
                pass
            time.sleep(0.2)
        fail("the server was not ready in time:\n" + "".join(self.log))


def fail(what):
    print("FAIL: " + what, flush=True)
    sys.exit(1)


def ok(what):
    print("ok: " + what, flush=True)


def expect_error(server, what, status, method, path, body=None, key=KEY, headers=None):
    got, h, payload = server.request(method, path, body, headers=headers, key=key)
    try:
        error = json.loads(payload)["error"]
        good = got == status and isinstance(error["message"], str) and "type" in error
    except (ValueError, KeyError, TypeError):
        good = False
    if not good:
        fail(f"{what}: expected {status} with an OpenAI error body, got {got}: {payload[:300]!r}")
    ok(f"{what}: {status} {error['message'][:70]}")
    return h


def chat(server, **extra):
    body = {"model": server.model_id, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    body.update(extra)
    return body


def clamped_to_the_room(server):
    """A max_tokens past the room the prompt leaves in the context is that
    room, as llama-server and Ollama take it: the answer ends at the context's
    end as one cut short (length, incomplete)."""
    words = "word " * 440
    status, _, payload = server.request("POST", "/v1/completions",
                                        {"prompt": words, "max_tokens": 100000, "temperature": 0})
    body = json.loads(payload)
    if status != 200 or body["choices"][0]["finish_reason"] != "length" or \
            body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"] != 512:
        fail(f"max_tokens past the room: {status} {payload[:300]!r}")
    ok(f"max_tokens 100000 after a {body['usage']['prompt_tokens']}-token prompt: "
       f"{body['usage']['completion_tokens']} tokens, to the context's 512, finish_reason length")
    status, _, payload = server.request("POST", "/v1/responses", {"model": server.model_id, "input": words,
                                                                  "max_output_tokens": 100000, "store": False})
    body = json.loads(payload)
    if status != 200 or body["status"] != "incomplete" or \
            body["usage"]["input_tokens"] + body["usage"]["output_tokens"] != 512:
        fail(f"max_output_tokens past the room: {status} {payload[:300]!r}")
    ok(f"max_output_tokens 100000: {body['usage']['output_tokens']} tokens, to the context's end, incomplete")


def bad_input(server):
    expect_error(server, "malformed JSON", 400, "POST", "/v1/chat/completions", "{not json")
    expect_error(server, "wrong type", 400, "POST", "/v1/chat/completions", chat(server, temperature="hot"))
    expect_error(server, "unknown model", 404, "POST", "/v1/chat/completions", chat(server, model="gpt-4o"))
    expect_error(server, "no messages", 400, "POST", "/v1/chat/completions", {"model": server.model_id})
    expect_error(server, "unknown role", 400, "POST", "/v1/chat/completions",
                 chat(server, messages=[{"role": "robot", "content": "x"}]))
    expect_error(server, "a prompt longer than the context", 400, "POST", "/v1/completions",
                 {"prompt": "word " * 2000, "max_tokens": 4})
    expect_error(server, "unknown route", 404, "GET", "/v1/nothing")
    expect_error(server, "no API key", 401, "POST", "/v1/chat/completions", chat(server), key=None)
    # A 100 MB body, announced with Expect: 100-continue as curl does: refused
    # from its Content-Length, before it is sent.
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {100 << 20}\r\nExpect: 100-continue\r\n\r\n".encode())
        reply = ""
        s.settimeout(10)
        try:
            while '"error"' not in reply or not reply.rstrip().endswith("}"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk.decode(errors="replace")
        except (socket.timeout, ConnectionResetError):
            pass
    if not reply.startswith("HTTP/1.1 413") or '"error"' not in reply:
        fail("a 100 MB body: expected 413 with an error body, got " + reply[:200])
    ok("a 100 MB body: 413")
    # A client that sends a byte a second holds its connection while it
    # trickles (30 s at most for a whole request), and others are served
    # meanwhile; once it falls silent it is answered 408 and dropped after
    # 10 s of silence.
    slow = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
    for i in range(6):
        slow.send(request[i:i + 1])
        if i == 3:
            status, _, _ = server.request("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})
            if status != 200:
                fail(f"a request while a slow client trickles: {status}")
        time.sleep(1)
    silent = time.time()
    slow.settimeout(30)
    said = b""
    try:
        while chunk := slow.recv(4096):
            said += chunk
        dropped = said == b"" or said.startswith(b"HTTP/1.1 408")
    except (ConnectionResetError, socket.timeout):
        dropped = True
    slow.close()
    if not dropped or time.time() - silent > 20:
        fail("a slow client that fell silent was not dropped within 20 s")
    ok(f"a slow client: others served while it trickled, dropped {time.time() - silent:.0f} s after it fell silent")
    # A flood of connections: each gets an answer, 200 or 503 with Retry-After.
    results = []

    def one():
        try:
            status, headers, payload = server.request("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1},
                                                      timeout=120)
            body = json.loads(payload)
            results.append(status == 200 or (status == 503 and "error" in body and "Retry-After" in headers))
        except Exception as e:  # noqa: BLE001 -- any failure is a lost request
            results.append(False)
            print("flood request failed:", e)
    threads = [threading.Thread(target=one) for _ in range(150)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not all(results):
        fail(f"a flood of 150 connections: {results.count(False)} without a proper answer")
    ok("a flood of 150 connections: each answered (200, or 503 with Retry-After)")


def responses_by_key(server):
    """Each API key reads only the responses it stored: another key gets
    404 for GET, DELETE, input_items and previous_response_id; ids hold 128
    random bits; the Bearer scheme is taken in any case. A DELETE while the
    response streams cancels it, and it is never stored."""
    body = {"model": server.model_id, "input": "Hello", "max_output_tokens": 4}
    status, _, payload = server.request("POST", "/v1/responses", body, key=None,
                                        headers={"Authorization": "bearer " + KEY})
    if status != 200:
        fail(f"a response asked for with 'bearer' in lower case: {status} {payload[:200]!r}")
    rid = json.loads(payload)["id"]
    if not re.fullmatch(r"resp_[0-9a-f]{32}", rid):
        fail(f"a response id of 128 random bits: {rid}")
    for method, path, what in (("GET", f"/v1/responses/{rid}", "GET"),
                               ("GET", f"/v1/responses/{rid}/input_items", "input_items"),
                               ("DELETE", f"/v1/responses/{rid}", "DELETE")):
        expect_error(server, f"another key's response: {what}", 404, method, path, key=OTHER_KEY)
    expect_error(server, "another key's response as previous_response_id", 404, "POST", "/v1/responses",
                 dict(body, previous_response_id=rid), key=OTHER_KEY)
    status, _, _ = server.request("GET", f"/v1/responses/{rid}")
    if status != 200:
        fail(f"the owner reads its response after another key tried: {status}")
    ok("a response is read, followed up and deleted only with the key that made it")

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/v1/responses", body=json.dumps(dict(body, max_output_tokens=400, stream=True)),
                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    r = conn.getresponse()
    streamed = None
    while streamed is None:
        line = r.readline()
        if not line:
            fail("a streamed response ended before its first event")
        if line.startswith(b"data: "):
            streamed = json.loads(line[6:])["response"]["id"]
    status, _, payload = server.request("DELETE", f"/v1/responses/{streamed}")
    if status != 200 or not json.loads(payload).get("deleted"):
        fail(f"DELETE of a response while it streams: {status} {payload[:200]!r}")
    rest = r.read()
    conn.close()
    last = json.loads(rest.decode().strip().split("data: ")[-1])
    if last["response"]["status"] != "cancelled":
        fail(f"a response deleted while it streamed went on: its last event {last['type']} {last['response']['status']}")
    status, _, _ = server.request("GET", f"/v1/responses/{streamed}")
    if status != 404:
        fail(f"a response deleted while it streamed was stored when its stream ended: GET {status}")
    ok(f"DELETE while streaming: 200, the stream ended with status cancelled after "
       f"{last['response']['usage']['output_tokens']} tokens, never stored")


def raw_exchange(server, data, timeout=30):
    """Sends bytes as they are; returns all the server says until it closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as s:
        s.sendall(data)
        said = b""
        while chunk := s.recv(65536):
            said += chunk
    return said


def metric(server, name):
    _, _, body = server.request("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    fail(f"/metrics has no {name}")


def generated_tokens(server):
    return int(metric(server, "tps_generated_tokens_total"))


def hostile_bodies(server):
    """Bodies and fields a hostile pass sent: each answered, the server goes on."""
    deep = b'{"prompt": "hi", "x": ' + b"[" * 300000 + b"]" * 300000 + b"}"
    expect_error(server, "300,000 levels of nesting (it crashed the job)", 400, "POST", "/v1/completions", deep)
    expect_error(server, "a number past a double (it was a 500)", 400, "POST", "/v1/completions",
                 '{"prompt": "hi", "temperature": 1e999}')
    expect_error(server, "tool_choice naming a function not offered", 400, "POST", "/v1/chat/completions",
                 chat(server, tools=[{"type": "function", "function": {"name": "f"}}],
                      tool_choice={"type": "function", "function": {"name": "g"}}))
    expect_error(server, "response_format json_schema without a schema", 400, "POST", "/v1/chat/completions",
                 chat(server, response_format={"type": "json_schema", "json_schema": {"name": "x"}}))
    expect_error(server, "a schema keyword the engine cannot honour", 400, "POST", "/v1/chat/completions",
                 chat(server, response_format={"type": "json_schema", "json_schema": {
                     "name": "x", "schema": {"type": "number", "multipleOf": 3}}}))
    expect_error(server, "a gzip body (decompressed, it was unbounded)", 415, "POST", "/v1/completions", b"x",
                 headers={"Content-Encoding": "gzip"})


def pipelining(server):
    """Three requests in one write on one connection: each answered, in order
    (httplib read each request through a buffer of its own: the rest was lost)."""
    one = json.dumps({"prompt": "hi", "max_tokens": 1}).encode()
    post = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(one)}\r\n").encode()
    said = raw_exchange(server, post + b"\r\n" + one + post + b"\r\n" + one + post + b"Connection: close\r\n\r\n" + one)
    if said.count(b"HTTP/1.1 200") != 3 or said.count(b'"text_completion"') != 3:
        fail(f"3 pipelined requests: {said.count(b'HTTP/1.1 200')} answered: {said[:300]!r}")
    ok("3 pipelined requests on one connection: 3 answers")


def http10_stream(server):
    """HTTP/1.0 has no chunked encoding: the stream comes without it, and the
    connection closes after it."""
    stream = json.dumps({"prompt": "hi", "max_tokens": 3, "stream": True}).encode()
    said = raw_exchange(server, (f"POST /v1/completions HTTP/1.0\r\nAuthorization: Bearer {KEY}\r\n"
                                 f"Content-Length: {len(stream)}\r\n\r\n").encode() + stream)
    head, _, body = said.partition(b"\r\n\r\n")
    if b"chunked" in head.lower() or not body.startswith(b"data: {") or not body.endswith(b"data: [DONE]\n\n"):
        fail(f"an HTTP/1.0 stream: {said[:400]!r} ... {said[-100:]!r}")
    ok("an HTTP/1.0 client: the stream without chunked encoding, closed after [DONE]")


def client_gone(server):
    """A non-streaming client that leaves: its sequence ends (it ran to its
    480th token for nobody)."""
    before = generated_tokens(server)
    long = json.dumps({"prompt": "Once", "max_tokens": 480, "temperature": 0}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall((f"POST /v1/completions HTTP/1.1\r\nAuthorization: Bearer {KEY}\r\n"
                   f"Content-Length: {len(long)}\r\n\r\n").encode() + long)
        time.sleep(0.3)
    deadline = time.time() + 30
    while time.time() < deadline:
        _, _, body = server.request("GET", "/v1/status")
        sequences = json.loads(body)["sequences"]
        if sequences["running"] == 0 and sequences["waiting"] == 0:
            break
        time.sleep(0.05)
    spent = generated_tokens(server) - before
    if spent >= 480:
        fail(f"a client gone mid-answer: its sequence ran on to its end ({spent} tokens)")
    ok(f"a client gone mid-answer (not streaming): its sequence ended after {spent} of 480 tokens")


def metric_labels(server):
    """A path sent without the key is counted under "other": a label taken
    from it forged a line of /metrics."""
    expect_error(server, "a path forging a metric line", 401, "GET", "/v1/x%22%7D%201%0Atps_forged_total%209%0A%23",
                 key=None)
    _, _, body = server.request("GET", "/metrics")
    if b"tps_forged_total" in body or b'endpoint="other",status="401"' not in body:
        fail("/metrics took a label from a path: " + body.decode()[:600])
    ok("/metrics: an unknown path counts as endpoint=\"other\"")


def costly_constraint(server):
    """A schema whose token masks took minutes of the engine loop (a pattern
    repeating something that matches in many ways) is refused when compiled,
    by parameter and keyword; one costly only past its first tokens ends its
    own request with a 400 when it gets there; meanwhile another client's
    first token comes within 2 s."""
    costly = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "(.*){200}"}}}
    expect_error(server, "a pattern too costly to follow", 400, "POST", "/v1/completions",
                     {"prompt": "hi", "max_tokens": 8, "response_format": costly})
    _, _, body = server.request("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 8, "response_format": costly})
    message = json.loads(body)["error"]["message"]
    if "response_format" not in message or "'pattern'" not in message or "too costly" not in message:
        fail(f"a pattern too costly to follow: the 400 names neither the parameter nor the keyword: {message}")
    later = {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "string", "pattern": "^1234567890123456789012345678901234567890(.*){200}$"}}}
    result = {}

    def hostile():
        result["hostile"] = server.request("POST", "/v1/completions",
                                           {"prompt": "hi", "max_tokens": 64, "response_format": later})

    thread = threading.Thread(target=hostile)
    thread.start()
    time.sleep(0.3)  # the hostile request runs
    t0 = time.time()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "Once", "max_tokens": 16, "stream": True}),
                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    r = conn.getresponse()
    events = 0
    while events < 2:  # the opening event, then the first token's
        line = r.readline()
        if not line:
            fail("a neighbour's stream ended before its first token")
        events += line.startswith(b"data: {")
    first = time.time() - t0
    r.read()
    conn.close()
    thread.join(120)
    status, _, body = result["hostile"]
    if status != 400 or "too many ways" not in json.loads(body)["error"]["message"]:
        fail(f"a constraint costly past its first tokens: {status} {body[:300]!r}")
    if first > 2:
        fail(f"a neighbour of a costly constraint: its first token after {first:.2f} s")
    ok(f"a constraint costly past its first tokens: 400 when it got there; a neighbour's first token in {first:.2f} s")


HOSTILE = [hostile_bodies, pipelining, http10_stream, client_gone, metric_labels, costly_constraint]


def startup(args):
    """A model that fails to open ends the job at once with its one line
    (httplib's listener thread, stopped before it had begun, made it hang
    silently, deaf to SIGTERM); SIGTERM at any moment of start-up ends it."""
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "truncated.gguf")
        with open(args.model, "rb") as f, open(bad, "wb") as out:
            out.write(f.read(100000))
        for i in range(5):
            t0 = time.time()
            try:
                run = subprocess.run([args.tpsrun, "-q", "serve", "-m", bad, "--port", "0"], capture_output=True,
                                     text=True, timeout=30)
            except subprocess.TimeoutExpired:
                fail(f"a model that fails to open: start-up {i} did not end in 30 s")
            lines = run.stderr.strip().splitlines()
            if run.returncode != 2 or len(lines) != 1 or bad not in lines[0]:
                fail(f"a model that fails to open: exit {run.returncode}, {run.stderr!r}")
        ok(f"a model that fails to open, 5 times: one line and exit 2 each time ({lines[0][:60]}...)")
    for delay in (0.0, 0.1, 0.4, 1.0):
        proc = subprocess.Popen([args.tpsrun, "-q", "serve", "-m", args.model, "--port", "0", "-t", "1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            fail(f"SIGTERM {delay} s into start-up: still running 30 s later")
    ok("SIGTERM 0, 0.1, 0.4 and 1 s into start-up: ended each time")


def load(server):
    latencies, statuses = [], []
    lock = threading.Lock()
    todo = list(range(200))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            t0 = time.time()
            status, _, payload = server.request("POST", "/v1/completions",
                                                {"prompt": f"Request {i}: tell me", "max_tokens": 8})
            with lock:
                statuses.append((status, json.loads(payload).get("usage", {}).get("completion_tokens", 0)))
                latencies.append(time.time() - t0)
    t0 = time.time()
    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    if len(statuses) != 200 or any(s != 200 for s, _ in statuses):
        fail(f"load: {sum(s != 200 for s, _ in statuses)} of {len(statuses)} requests failed")
    tokens = sum(n for _, n in statuses)
    latencies.sort()
    ok(f"load: 200 requests at 16 at a time, none lost, in {elapsed:.1f} s ({tokens / elapsed:.0f} tok/s, "
       f"p50 {latencies[100]:.2f} s, p99 {latencies[197]:.2f} s)")


def greedy_logprobs(server):
    """A greedy answer's tokens with their top-5 log-probabilities, as the JSON
    prints them (the shortest text that gives back the same float)."""
    status, _, payload = server.request("POST", "/v1/completions", {"prompt": "The capital of France is",
                                                                     "max_tokens": 12, "temperature": 0,
                                                                     "logprobs": 5})
    if status != 200:
        fail(f"a greedy answer with log-probabilities: {status} {payload[:200]!r}")
    logprobs = json.loads(payload)["choices"][0]["logprobs"]
    if len(logprobs["tokens"]) < 4:
        fail(f"a greedy answer of up to 12 tokens gave {len(logprobs['tokens'])}: too few to compare")
    return logprobs


def restart_restores(args):
    """--cache-dir: what a 2-rank server's pool held when it stopped is loaded
    at the next start, and the same prompt then computes only its last
    tokens and answers with the same bits."""
    with tempfile.TemporaryDirectory() as cache:
        flags = ["--cache-ram", "16", "--cache-dir", cache, "--log-requests", "off"]
        answers = []
        for turn in ("first", "after a restart"):
            server = Server(args, extra=flags)
            try:
                server.wait_ready()
                loaded = metric(server, "tps_cache_disk_loaded_blocks")
                status, _, payload = server.request("POST", "/v1/completions", {
                    "prompt": "A prompt the cache keeps across a restart: " + " ".join(["words"] * 40),
                    "max_tokens": 6, "temperature": 0, "logprobs": 5})
                if status != 200:
                    fail(f"--cache-dir, {turn}: {status} {payload[:200]!r}")
                body = json.loads(payload)
                answers.append((loaded, body["usage"]["prompt_tokens_details"]["cached_tokens"],
                                body["usage"]["prompt_tokens"], body["choices"][0]["logprobs"]))
            except BaseException:
                os.killpg(server.proc.pid, signal.SIGKILL)
                raise
            stop(server.proc, signal.SIGUSR1, f"--cache-dir, {turn}: SIGUSR1 to mpirun", server.log)
            if any(REQUEST_LINE.search(line) for line in server.log):
                fail("--log-requests off: a request's line in the log:\n" + "".join(server.log))
        (loaded0, cached0, _, first), (loaded1, cached1, prompt, again) = answers
        if loaded0 != 0 or cached0 != 0:
            fail(f"--cache-dir: an empty directory gave {loaded0} blocks and {cached0} cached tokens")
        if loaded1 < 1 or cached1 < prompt - 16:
            fail(f"--cache-dir after a restart: {loaded1} blocks loaded, {cached1} of {prompt} prompt tokens cached")
        if again != first:
            fail("--cache-dir: the answer after a restart differs from the first")
        ok(f"--cache-dir: after a restart {int(loaded1)} blocks loaded, {cached1} of {prompt} prompt tokens from the "
           f"cache, the same log-probabilities")


def port_taken(args, port):
    """A second server on a port in use is refused with one line naming it."""
    run = subprocess.run([args.tpsrun, "-q", "serve", "-m", args.model, "--port", str(port)], capture_output=True,
                         text=True, timeout=60)
    lines = run.stderr.strip().splitlines()
    if run.returncode == 0 or len(lines) != 1 or f"--port {port}" not in lines[0]:
        fail(f"a second server on port {port}: exit {run.returncode}, {run.stderr!r}")
    ok(f"a second server on the same port: {lines[0]}")


def stop(proc, signum, what, log, server=None):
    """The signal ends the server gracefully, every rank, with exit code 0;
    with a server, while it generates a long answer: that one is ended at the
    next step (a 503), and the server within 2 s."""
    busy = {}
    if server:
        def long_answer():
            busy["answer"] = server.request("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 480})

        before = generated_tokens(server)
        thread = threading.Thread(target=long_answer)
        thread.start()
        deadline = time.time() + 30
        while time.time() < deadline and generated_tokens(server) < before + 8:
            time.sleep(0.02)
    t0 = time.time()
    proc.send_signal(signum)
    try:
        code = proc.wait(timeout=30)
        took = time.time() - t0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        fail(f"{what}: the server did not end within 30 s:\n" + "".join(log[-20:]))
    time.sleep(0.2)  # the log reader's last lines
    said = "".join(log[-6:])
    if code != 0 or "stopped" not in said:
        fail(f"{what}: exit code {code}:\n{said}")
    if server:
        thread.join(30)
        status, _, body = busy.get("answer", (0, {}, b""))
        if status != 503 or took > 2:
            fail(f"{what} while answering: the answer got {status} {body[:200]!r}; the server ended in {took:.1f} s")
        what += " while a long answer ran (it got 503)"
    ok(f"{what}: ended in {took:.1f} s with exit code 0: {said.strip().splitlines()[-1]}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tpsrun", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--reference", required=True, help="tests/reference (node_modules with openai, playwright-core)")
    p.add_argument("--node", default="node")
    p.add_argument("--no-browser", action="store_true")
    args = p.parse_args()
    server = Server(args)
    try:
        server.wait_ready()
        ok("GET /health: ready")
        base = f"http://127.0.0.1:{server.port}"
        run = subprocess.run([args.node, os.path.join(args.reference, "openai_client.mjs"), base, KEY,
                              server.model_id], timeout=600)
        if run.returncode != 0:
            fail("the openai client's checks")
        t0 = time.time()
        run = subprocess.run([args.node, os.path.join(args.reference, "responses_client.mjs"), base, KEY,
                              server.model_id], timeout=300)
        if run.returncode != 0:
            fail("the openai client's Responses API checks")
        ok(f"the Responses API checks took {time.time() - t0:.1f} s")
        t0 = time.time()
        run = subprocess.run([args.node, os.path.join(args.reference, "messages_client.mjs"), base, KEY,
                              server.model_id], timeout=300)
        if run.returncode != 0:
            fail("Anthropic's client's Messages API checks; the server's last lines:\n" + "".join(server.log[-20:]))
        ok(f"the Messages API checks took {time.time() - t0:.1f} s")
        status, _, _ = server.request("GET", "/v1/models", key=None, headers={"x-api-key": KEY})
        if status != 200:
            fail(f"GET /v1/models with x-api-key: {status}")
        ok("x-api-key is accepted on every route (GET /v1/models)")
        logged = [line for line in server.log if REQUEST_LINE.search(line)]
        if not any("POST /v1/chat/completions 200 (" in line and '"OpenAI/JS ' in line for line in logged) or \
                not any("POST /v1/messages 200 (" in line and '"Anthropic/JS ' in line for line in logged):
            fail("the request log has no line of the openai or Anthropic client's requests:\n" + "".join(logged[-5:]))
        ok(f"the request log: {len(logged)} lines, e.g. {logged[-1].strip()}")
        if not args.no_browser:
            run = subprocess.run([args.node, os.path.join(args.reference, "web_page.mjs"), base, KEY, "2"],
                                 timeout=300)
            if run.returncode != 0:
                fail("the web page's checks")
        bad_input(server)
        clamped_to_the_room(server)
        responses_by_key(server)
        for check in HOSTILE:
            check(server)
        load(server)
        status, _, body = server.request("GET", "/metrics")
        text = body.decode()
        for name in ("tps_requests_total", "tps_generated_tokens_total", "tps_requests_waiting",
                     "tps_requests_running", "tps_kv_blocks_total", "tps_generated_tokens_per_second",
                     "tps_responses_stored", "tps_responses_hits_total", "tps_responses_evictions_total"):
            if name not in text:
                fail(f"/metrics has no {name}")
        if 'tps_requests_total{endpoint="/v1/responses",status="200"}' not in text:
            fail("/metrics counts no /v1/responses request")
        ok("GET /metrics: Prometheus text with requests, tokens, queue, running, KV pool, tokens/s, stored responses")
        status, _, body = server.request("GET", "/v1/status")
        stored = json.loads(body).get("responses", {})
        if stored.get("hits", 0) < 1 or stored.get("stored", 0) < 1:
            fail(f"/v1/status: the response store {stored}")
        ok(f"GET /v1/status: the response store {stored}")
        status, _, body = server.request("GET", "/health")
        if status != 200:
            fail("the server stopped serving")
        port_taken(args, server.port)
        split_logprobs = greedy_logprobs(server)
    except BaseException:
        os.killpg(server.proc.pid, signal.SIGKILL)
        raise
    # mpirun passes SIGUSR1 on to the ranks and ends with their exit code
    # (SIGTERM it passes on too, but then ends with 1 whatever they do).
    stop(server.proc, signal.SIGUSR1, "SIGUSR1 to mpirun", server.log)
    alone = Server(args, ranks=1)
    try:
        alone.wait_ready()
        if greedy_logprobs(alone) != split_logprobs:
            fail("a greedy answer on two ranks and on one: the log-probabilities differ")
        ok(f"a greedy answer: {len(split_logprobs)} tokens' top-5 log-probabilities the same bits on two ranks as on one")
    except BaseException:
        os.killpg(alone.proc.pid, signal.SIGKILL)
        raise
    stop(alone.proc, signal.SIGTERM, "SIGTERM to a lone tpsrun serve", alone.log, alone)
    restart_restores(args)
    startup(args)
    print("all checks passed")


if __name__ == "__main__":
    main()
