#!/usr/bin/env python3
"""Signals during generation: SIGTERM and SIGINT, to one rank or to mpirun
(which passes them on to every rank), stop the run at its next step within
5 s: what was generated is printed, one line says why, every rank is gone,
and no shared-memory segment is left in /dev/shm. A job killed outright,
mpirun with it, during a long prefill leaves no segment either. A tpsrun
started without mpirun keeps Open MPI's session files apart from every other
one's, so one ending cannot pull the directory from under another's start,
and removes the empty ones that singletons a signal ended left behind.

  fault_test.py --tpsrun build/bin/tpsrun --model build/models/gpt-oss-small.gguf --mpiexec "mpirun --oversubscribe"
"""

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

ARGS = None


def alive(pid):
    # A rank mpirun left unreaped is a zombie: it has ended.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Signals(unittest.TestCase):
    def stop(self, sig, ranks):
        shm_before = set(os.listdir("/dev/shm"))
        # A long run: 100,000 tokens of a small model, streamed.
        cmd = [ARGS.tpsrun, "-q", "-m", ARGS.model, "-p", "hi", "--temp", "0", "--ctx", "131072", "-n", "100000"]
        if ranks > 1:
            cmd = [*shlex.split(ARGS.mpiexec), "-np", str(ranks), *cmd]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            first = p.stdout.read(1)  # generation has begun
            self.assertTrue(first, "no output before the signal")
            out = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout
            ranks_pids = [int(x) for x in out.split()] if ranks > 1 else [p.pid]
            self.assertEqual(len(ranks_pids), ranks)
            segments = set(os.listdir("/dev/shm")) - shm_before  # the job's (the test runs alone)
            p.send_signal(sig)
            t0 = time.monotonic()
            out, err = p.communicate(timeout=30)
            seconds = time.monotonic() - t0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        err = err.decode(errors="replace")
        where = f"{shlex.join(cmd)} after {signal.Signals(sig).name}: rc {p.returncode}, stderr {err!r}"
        self.assertLess(seconds, 5.0, where)
        self.assertNotEqual(p.returncode, 0, where)
        self.assertGreater(len(first + out), 1, where)  # the text so far is printed
        # mpirun passes SIGINT on to its ranks as SIGTERM.
        name = "SIGINT" if sig == signal.SIGINT and ranks == 1 else "SIGTERM"
        self.assertEqual(err.count(f"tpsrun: stopped by {name}"), 1, where)
        if ranks == 1:
            self.assertEqual(p.returncode, 128 + sig, where)
        time.sleep(0.5)
        self.assertEqual([pid for pid in ranks_pids if alive(pid)], [], where)
        self.assertEqual(segments & set(os.listdir("/dev/shm")), set(), where)

    def test_sigint_one_rank(self):
        self.stop(signal.SIGINT, 1)

    def test_sigterm_one_rank(self):
        self.stop(signal.SIGTERM, 1)

    def test_sigterm_to_mpirun(self):
        self.stop(signal.SIGTERM, 2)

    def test_sigint_to_mpirun(self):
        self.stop(signal.SIGINT, 2)

    def stop_json(self, ranks):
        # --json prints its object once the run stops: whole, though the job
        # then ends non-zero (nothing buffered may be dropped on the way out).
        cmd = [ARGS.tpsrun, "-m", ARGS.model, "-p", "hi", "--temp", "0", "--ctx", "131072", "-n", "100000", "--json"]
        if ranks > 1:
            cmd = [*shlex.split(ARGS.mpiexec), "-np", str(ranks), *cmd]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for line in p.stderr:  # generation is about to begin
                if "KV pool:" in line:
                    break
            time.sleep(1)
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        where = f"{shlex.join(cmd[:3])} ... after SIGTERM: rc {p.returncode}, stdout {out[-300:]!r}, stderr {err!r}"
        self.assertNotEqual(p.returncode, 0, where)
        self.assertEqual(json.loads(out)["stop"], "SIGTERM", where)

    def test_sigterm_json_is_whole_one_rank(self):
        self.stop_json(1)

    def test_sigterm_json_is_whole_under_mpirun(self):
        self.stop_json(2)

    def test_killed_with_mpirun_leaves_no_segment(self):
        # Open MPI's shared-memory segments go in a directory of this test's
        # own; mpirun and both ranks are killed (SIGKILL: no cleanup runs, as
        # when mpirun is interrupted twice) during a long prefill.
        with tempfile.TemporaryDirectory() as shm:
            env = dict(os.environ, OMPI_MCA_btl_vader_backing_directory=shm, OMPI_MCA_osc_sm_backing_directory=shm)
            prompt = " ".join(["river stone cloud music paper light"] * 3000)
            cmd = [*shlex.split(ARGS.mpiexec), "-np", "2", ARGS.tpsrun, "-m", ARGS.model, "-p", prompt,
                   "-n", "4", "--ctx", "32768"]
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
            try:
                for line in p.stderr:  # the model is loaded, the prompt's prefill under way
                    if "KV pool:" in line:
                        break
                time.sleep(1)
                ranks = [int(x) for x in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                                                        text=True).stdout.split()]
                self.assertEqual(len(ranks), 2)
                for pid in [p.pid, *ranks]:
                    os.kill(pid, signal.SIGKILL)
                p.wait(timeout=30)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            time.sleep(0.5)
            self.assertEqual([pid for pid in ranks if alive(pid)], [])
            self.assertEqual(os.listdir(shm), [])


class SessionDirectory(unittest.TestCase):
    def test_singleton_keeps_its_own_session_directory(self):
        # Every isolated Open MPI singleton on a host shares one session tree
        # (TMP/ompi.HOST.UID/jf.0/1/0) and removes it as it ends: a tpsrun
        # ending while another started failed the other's MPI_Init. The
        # shared jf.0 is planted here as a file, which fails every start that
        # still uses it; tpsrun must start, run and leave nothing behind.
        with tempfile.TemporaryDirectory() as tmp, tempfile.NamedTemporaryFile() as empty:
            shared = os.path.join(tmp, f"ompi.{socket.gethostname().split('.')[0]}.{os.getuid()}")
            os.mkdir(shared)
            open(os.path.join(shared, "jf.0"), "w").close()
            env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_MCA_orte_")}
            env.update(TMPDIR=tmp)
            cmd = [ARGS.tpsrun, "-q", "-m", ARGS.model, "perplexity", "-f", empty.name]
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
            where = f"{shlex.join(cmd)}: rc {done.returncode}, stderr {done.stderr!r}"
            self.assertEqual(done.returncode, 2, where)  # the file's own error: 0 tokens
            self.assertIn("0 tokens", done.stderr, where)
            self.assertEqual(sorted(os.listdir(tmp)), [os.path.basename(shared)], where)

    def test_singleton_removes_what_ended_singletons_left(self):
        # A singleton a signal ends leaves its empty session tree; the next
        # removes it, and never one that holds a file or whose process runs.
        with tempfile.TemporaryDirectory() as tmp, tempfile.NamedTemporaryFile() as empty:
            prefix = f"ompi.{socket.gethostname().split('.')[0]}.{os.getuid()}.singleton."
            ended = [subprocess.Popen(["true"]) for _ in range(2)]
            for p in ended:
                p.wait()
            orphan, holding, running = (prefix + str(pid) for pid in (ended[0].pid, ended[1].pid, os.getpid()))
            for name in (orphan, holding, running):
                os.makedirs(os.path.join(tmp, name, "1", "0"))
            open(os.path.join(tmp, holding, "1", "0", "left"), "w").close()
            env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_MCA_orte_")}
            env.update(TMPDIR=tmp)
            cmd = [ARGS.tpsrun, "-q", "-m", ARGS.model, "perplexity", "-f", empty.name]
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
            where = f"{shlex.join(cmd)}: rc {done.returncode}, stderr {done.stderr!r}"
            self.assertEqual(done.returncode, 2, where)
            self.assertEqual(sorted(os.listdir(tmp)), sorted([holding, running]), where)
            self.assertTrue(os.path.exists(os.path.join(tmp, holding, "1", "0", "left")), where)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--tpsrun", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--mpiexec", required=True)
    ARGS, rest = p.parse_known_args()
    result = unittest.main(argv=[sys.argv[0], *rest], exit=False)
    sys.exit(0 if result.result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
