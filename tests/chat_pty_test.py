#!/usr/bin/env python3
"""`tpsrun chat` driven through a pseudo-terminal, as a person would: a
question streams an answer and the prompt comes back; /stats, /reasoning and
/reset answer; a second question reuses the conversation's cached prefix;
Ctrl-C during an answer stops it and keeps the chat; /quit leaves with exit
code 0.

  chat_pty_test.py --tpsrun PATH --model FILE
"""

import argparse
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tpsrun", required=True)
    p.add_argument("--model", required=True)
    args = p.parse_args()
    master, slave = pty.openpty()
    proc = subprocess.Popen([args.tpsrun, "-q", "chat", "-m", args.model, "-n", "1200", "--temp", "0", "-t", "1"],
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True, close_fds=True)
    os.close(slave)
    seen = ""

    def fail(what):
        proc.kill()
        print(f"FAIL: {what}\n--- terminal ---\n{seen[-2000:]}")
        sys.exit(1)

    def read_until(pattern, seconds=60):
        nonlocal seen
        deadline = time.time() + seconds
        start = len(seen)
        while time.time() < deadline:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    seen += os.read(master, 65536).decode(errors="replace")
                except OSError:
                    break
            m = re.search(pattern, seen[start:], re.S)
            if m:
                return m
        fail(f"waited for {pattern!r}")

    def send(text):
        os.write(master, text.encode())

    read_until(r"> $")
    print("ok: the prompt")
    # Each line is sent once the prompt is back: the terminal echoes what is
    # typed at once, so a line sent earlier shows before the prompt and the
    # answer (a loaded CI machine did that, and the answer's check failed).
    send("/reasoning high\n")
    read_until(r"\(reasoning: high\)\r?\n> $")
    print("ok: /reasoning high")
    send("Hello there\n")
    read_until(r"\n> $", 120)
    print("ok: an answer, then the prompt again")
    send("/stats\n")
    m = read_until(r"last answer: (\d+) tokens.*?prompt (\d+) tokens, (\d+) of them from the prefix cache")
    print(f"ok: /stats ({m.group(1)} tokens)")
    send("And then?\n")
    read_until(r"\n> $", 120)
    send("/stats\n")
    m = read_until(r"prompt (\d+) tokens, (\d+) of them from the prefix cache")
    if int(m.group(2)) < 16:
        fail("the second turn reused no cached prefix")
    print(f"ok: the second turn reused {m.group(2)} of {m.group(1)} prompt tokens")
    # The answers show what the model says: synthetic weights do not follow
    # harmony, so it is their raw text.
    if not re.search(r"Hello there\r?\n[^>\n]{20,}", seen):
        fail("the first answer showed no text")
    print("ok: the answer's text is shown")
    # Ctrl-C once an answer is under way (1200 tokens: long enough to
    # interrupt).
    send("/reset\n")
    read_until(r"\(a new conversation\)\r?\n> $")
    print("ok: /reset")
    send("Tell me a long story\n")
    read_until(r"story\r?\n\S")
    os.killpg(proc.pid, signal.SIGINT)
    read_until(r"\(stopped\)\r?\n> $", 60)
    send("/stats\n")
    m = read_until(r"last answer: (\d+) tokens")
    if int(m.group(1)) >= 1200:
        fail("the stopped answer ran to its length")
    print(f"ok: Ctrl-C stopped the answer after {m.group(1)} tokens and the chat goes on")
    send("/quit\n")
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        fail("/quit did not end the chat")
    if code != 0:
        fail(f"exit code {code}")
    print("ok: /quit leaves with exit code 0\nall checks passed")


if __name__ == "__main__":
    main()
