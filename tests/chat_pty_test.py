#!/usr/bin/env python3
"""`tpsrun chat` driven through a pseudo-terminal, as a person would: a
question streams an answer and the prompt comes back; /stats, /reasoning and
/reset answer; a second question reuses the conversation's cached prefix;
Ctrl-C during an answer stops it and keeps the chat; /quit leaves with exit
code 0. The terminal is the session's own and the chat runs as an
interactive shell runs a job (a process group of its own, in the terminal's
foreground), so Ctrl-C is the ^C byte the terminal turns into SIGINT for its
foreground group. With --mpiexec the chat runs under `mpirun -np 2`, where
that group is mpirun's, and mpirun ends the whole job on SIGINT.

  chat_pty_test.py --tpsrun PATH --model FILE [--mpiexec "mpirun --oversubscribe"]
"""

import argparse
import os
import pty
import re
import select
import shlex
import signal
import sys
import time


def start(cmd):
    """Starts cmd in a new session on a new pseudo-terminal, as a shell with
    job control would: returns the shell's pid and the terminal's master."""
    master, slave = pty.openpty()
    name = os.ttyname(slave)
    shell = os.fork()
    if shell == 0:
        try:
            os.close(master)
            os.setsid()
            tty = os.open(name, os.O_RDWR)  # the session's controlling terminal
            os.close(slave)
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            job = os.fork()
            if job == 0:
                os.setpgid(0, 0)
                signal.signal(signal.SIGTTOU, signal.SIG_DFL)
                for fd in (0, 1, 2):
                    os.dup2(tty, fd)
                os.execvp(cmd[0], cmd)
            try:
                os.setpgid(job, job)  # both set it, as shells do: whichever runs first
            except OSError:
                pass
            os.tcsetpgrp(tty, job)
            _, status = os.waitpid(job, 0)
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
        except BaseException:
            os._exit(127)
    os.close(slave)
    return shell, master


def kill_session(sid):
    """Every process of the session, killed."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tpsrun", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--mpiexec", help="run under this launcher with 2 ranks")
    args = p.parse_args()
    cmd = [args.tpsrun, "-q", "chat", "-m", args.model, "-n", "1200", "--temp", "0", "-t", "1"]
    if args.mpiexec:
        cmd = [*shlex.split(args.mpiexec), "-q", "-np", "2", *cmd]
    shell, master = start(cmd)
    seen = ""

    def fail(what):
        kill_session(shell)
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
    send("\x03")  # Ctrl-C: SIGINT to the terminal's foreground group
    read_until(r"\(stopped\)\r?\n> $", 60)
    send("/stats\n")
    m = read_until(r"last answer: (\d+) tokens")
    if int(m.group(1)) >= 1200:
        fail("the stopped answer ran to its length")
    print(f"ok: Ctrl-C stopped the answer after {m.group(1)} tokens and the chat goes on")
    send("/quit\n")
    deadline = time.time() + 30
    while (ended := os.waitpid(shell, os.WNOHANG))[0] == 0:
        if time.time() > deadline:
            fail("/quit did not end the chat")
        time.sleep(0.1)
    code = os.waitstatus_to_exitcode(ended[1])
    if code != 0:
        fail(f"exit code {code}")
    print("ok: /quit leaves with exit code 0\nall checks passed")


if __name__ == "__main__":
    main()
