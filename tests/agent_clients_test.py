#!/usr/bin/env python3
"""Agent clients against `mpirun -np 2 tpsrun serve`, end to end, on loopback:
Codex CLI (npm @openai/codex, its native binary) runs `codex exec` and then
`codex exec resume --last`, each to exit 0 with no API error, the follow-up
taking most of its resent conversation from the prefix cache; OpenAI's
Agents SDK (npm @openai/agents, tests/reference/agents_client.mjs) runs an
agent whose strict tool is forced within a 600-token budget. The server runs
without --ctx: its context is the model's (131,072 positions), as agents
need, said at start and in /v1/models; its request log names each client.

Codex's first request carries function tools, a `namespace` tool, a hosted
web_search tool, store: false with reasoning.encrypted_content, and ~40 kB of
instructions; every later request resends the whole conversation. The test
models have random weights, so the server holds the final answer to a short
grammar (`serve --grammar`): a turn then ends, as a real model's does, and
Codex's session completes. Calls the random model makes on the way (to
Codex's own tools) are Codex's business: their arguments are held to the
tools' parameters, and what Codex's tools answer them is not checked.

  agent_clients_test.py --tpsrun PATH --model FILE --reference DIR
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ANSWER = "Hello from tps."


def fail(what):
    print("FAIL: " + what, flush=True)
    sys.exit(1)


def ok(what):
    print("ok: " + what, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    fail(f"/metrics has no {name}")


def start_server(args, tmp):
    grammar = os.path.join(tmp, "final.gbnf")
    with open(grammar, "w") as f:
        f.write(f'root ::= "{ANSWER}"\n')
    port = free_port()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo")
    cmd = ["mpirun", "--oversubscribe", "-np", "2", args.tpsrun, "serve", "-m", args.model, "--port", str(port),
           "--parallel", "2", "-t", "1", "--grammar", grammar]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    log = []
    threading.Thread(target=lambda: log.extend(proc.stdout), daemon=True).start()
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            fail("the server exited while starting:\n" + "".join(log))
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return proc, port, log
        except OSError:
            pass
        time.sleep(0.2)
    fail("the server was not ready in time:\n" + "".join(log))


def codex(args, home, work, *words):
    binary = os.path.join(os.path.abspath(args.reference), "node_modules", ".bin", "codex")
    # Loopback only: with apps, plugins and in-app updates on, Codex looks
    # github.com up at start (strace: a DNS query, then connections to
    # 127.0.0.1 only); with them off it resolves and connects to nothing else.
    run = subprocess.run([binary, "exec", "--skip-git-repo-check", "--disable", "apps", "--disable", "plugins",
                          "--disable", "in_app_updates", "-c", 'model_reasoning_effort="low"', *words],
                         cwd=work, env=dict(os.environ, CODEX_HOME=home), capture_output=True, text=True,
                         timeout=600, stdin=subprocess.DEVNULL, start_new_session=True)
    said = run.stdout + run.stderr
    # "ERROR: {...}" is an API error Codex got from the server; a tool's own
    # failure on the random model's arguments is logged by Codex's tool
    # router, and is no error of the server's.
    errors = [line for line in said.splitlines() if line.startswith("ERROR: ")]
    if run.returncode != 0 or errors or ANSWER not in run.stdout:
        fail(f"codex exec {' '.join(words)}: exit {run.returncode}, API errors {errors[:2]}:\n{said[-3000:]}")
    return said


def context_sized_for_agents(port, log):
    """Without --ctx, the model's context: in the start-up line and /v1/models."""
    said = [line for line in log if "serving " in line]
    if not said or "of up to 131072 positions (the model's context)" not in said[0]:
        fail("the start-up line does not say the model's context:\n" + "".join(log))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
        model = json.loads(r.read())["data"][0]
    if model.get("max_model_len") != 131072:
        fail(f"/v1/models: {model}")
    ok(f"without --ctx: {said[0].strip()}; /v1/models max_model_len {model['max_model_len']}")


def agents_sdk(args, port, log):
    t0 = time.time()
    run = subprocess.run(["node", os.path.join(args.reference, "agents_client.mjs"), f"http://127.0.0.1:{port}",
                          os.path.splitext(os.path.basename(args.model))[0]], capture_output=True, text=True,
                         timeout=600)
    print(run.stdout, end="", flush=True)
    if run.returncode != 0:
        fail(f"the Agents SDK's run:\n{run.stdout[-2000:]}{run.stderr[-3000:]}\nthe server's last lines:\n" +
             "".join(log[-20:]))
    ok(f"the Agents SDK: a forced strict tool within 600 tokens, the run complete ({time.time() - t0:.1f} s)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tpsrun", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--reference", required=True, help="tests/reference (node_modules with @openai/codex)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, log = start_server(args, tmp)
        try:
            model = os.path.splitext(os.path.basename(args.model))[0]
            home, work = os.path.join(tmp, "codex-home"), os.path.join(tmp, "work")
            os.makedirs(home)
            os.makedirs(work)
            with open(os.path.join(home, "config.toml"), "w") as f:
                # Loopback only: no update check, no analytics.
                f.write(f'model = "{model}"\nmodel_provider = "tps"\ncheck_for_update_on_startup = false\n\n'
                        f'[analytics]\nenabled = false\n\n[model_providers.tps]\nname = "tps"\n'
                        f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\n')
            t0 = time.time()
            codex(args, home, work, "Say hi.")
            ok(f"codex exec: exit 0, no API error, the answer shown ({time.time() - t0:.1f} s)")
            prompt, cached = metric(port, "tps_prompt_tokens_total"), metric(port, "tps_prompt_tokens_cached_total")
            t0 = time.time()
            codex(args, home, work, "resume", "--last", "Say hi again.")
            prompt = metric(port, "tps_prompt_tokens_total") - prompt
            cached = metric(port, "tps_prompt_tokens_cached_total") - cached
            # A resumed turn that follows only text reuses all but its new
            # message (7,536 of 7,561 measured). After the random model's
            # calls, each request drops the reasoning of the turn before: it
            # reuses up to that message (the scheduler keeps the window
            # before each message boundary) -- 72-100% over 8 resumes, where
            # 2 of 6 reused nothing before the boundary windows were kept.
            if prompt <= 0 or cached < 0.6 * prompt:
                fail(f"codex exec resume --last: {cached:.0f} of {prompt:.0f} prompt tokens from the cache (bar 60%)")
            ok(f"codex exec resume --last: exit 0, no API error, {cached:.0f} of {prompt:.0f} prompt tokens "
               f"({100 * cached / prompt:.0f}%) from the prefix cache ({time.time() - t0:.1f} s)")
            if "X-Tps-Omitted-Tools" not in "".join(log) and "hosted tools left out" not in "".join(log):
                fail("the server's log does not say it left web_search out:\n" + "".join(log[-20:]))
            ok("the server's log says it left the hosted web_search tool out")
            context_sized_for_agents(port, log)
            agents_sdk(args, port, log)
            for client in ('"codex_exec/', '"Agents/JavaScript '):
                lines = [line for line in log if "POST /v1/responses 200 (" in line and client in line]
                if not lines:
                    fail(f"the request log has no line of {client[1:]}'s requests:\n" + "".join(log[-10:]))
                ok(f"the request log: {lines[-1].strip()}")
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    print("all checks passed")


if __name__ == "__main__":
    main()
