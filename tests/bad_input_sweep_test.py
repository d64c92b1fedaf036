#!/usr/bin/env python3
"""Every flag of the tps tools with the values a hostile user tries --
empty, negative, zero, NaN, huge, non-numeric, fractional -- and special files
(a FIFO, a device, a directory) where a file is asked for. Under one rank and
under `mpirun -q -np 2`, each case must end promptly with exit 0 or with exit
2 and exactly one line on stderr that names the flag or file and is no
internal error; the cases listed as refused must be refused, the accepted
ones must run.

  bad_input_sweep_test.py --bin build/bin --model build/models/gpt-oss-tiny.gguf --mpiexec "mpirun --oversubscribe"
"""

import argparse
import concurrent.futures
import dataclasses
import os
import shlex
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ARGS = None
SPECIAL = {}  # name -> path: a FIFO, a device, a directory, an empty file
WORKERS = 4  # cases at once: 2 cores, and a case mostly waits (MPI start-up, an exit)

# tpsrun generation: flag -> (values that must be refused, values that must run).
GENERATE = {
    "-n": (["", "-1", "0", "abc", "1.5", "99999999999999999999"], ["1"]),
    "--temp": (["", "-1", "nan", "inf", "abc"], ["0", "1e30"]),
    "--top-k": (["", "-1", "abc", "1.5", "99999999999999999999"], ["0", "1000000000"]),
    "--top-p": (["", "0", "-1", "1.5", "nan"], ["1"]),
    "--min-p": (["", "-1", "1", "nan"], ["0"]),
    "--seed": (["", "-1", "abc", "1.5", "99999999999999999999"], ["0", "18446744073709551615"]),
    "--ctx": (["", "0", "-1", "abc", "2147483647", "1e9"], ["131072"]),
    "--batch": (["", "0", "-1", "100000000", "3000000000"], ["1"]),
    "--parallel": (["", "0", "-1", "100000"], ["3"]),
    "--kv-size": (["", "0", "-1", "abc", "1.5", "1000G", "99999999999999999999", "17179869184G", "99999999999999999999G"],
                  ["1M"]),
    "--kv-type": (["", "q4_1", "f64", "8", "q8_0 "], ["q8_0", "BF16"]),
    "--top-logprobs": (["", "-1", "101", "abc"], ["0"]),
    "-t": (["", "0", "-1", "100000", "abc"], ["16"]),
    "--split": (["", "foo"], ["layers"]),
    "--exchange": (["", "foo"], ["mpi"]),
    "--reasoning": (["", "foo"], []),
    # The model's experts are MXFP4 (lower than q8_0), its rows 64 values (not Q4_K's 256).
    "--quantize": (["", "int3", "attn", "attn=", "attn=f16", "experts=q8_0", "attn=q4_k", "all=q8_0,"], ["int8", "int4"]),
    "-m": (["", "/nonexistent", "fifo", "device", "directory", "empty"], []),
    "--prompts-file": (["", "fifo", "device", "directory", "empty"], []),
    "-f": (["", "/nonexistent", "fifo", "device", "directory", "empty"], []),
}


def files(value):
    return SPECIAL.get(value, value)


@dataclasses.dataclass
class Case:
    argv: list  # the tool and its arguments
    names: list  # what the error line may name (one of them)
    refused: bool = True  # else it must run (exit 0)
    ranks: int = 1  # more: under mpirun

    def command(self):
        return ([*shlex.split(ARGS.mpiexec), "-q", "-np", str(self.ranks)] if self.ranks > 1 else []) + self.argv


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=60)
    except subprocess.TimeoutExpired:
        return None


class Sweep(unittest.TestCase):
    def run_cases(self, cases):
        """Runs the cases WORKERS at a time (a case mostly waits for its
        processes to start), then checks each in a subtest of its own."""
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(run, [c.command() for c in cases]))
        for case, done in zip(cases, results):
            cmd = shlex.join(case.command())
            with self.subTest(cmd=cmd):
                self.check(case, cmd, done)

    def check(self, case, cmd, done):
        if done is None:
            self.fail(f"{cmd}: still running after 60 s")
        where = f"{cmd}\nstderr: {done.stderr!r}"
        if not case.refused:
            self.assertEqual(done.returncode, 0, where)
            return
        self.assertEqual(done.returncode, 2, where)
        lines = done.stderr.splitlines()
        self.assertEqual(len(lines), 1, where)
        tool = Path(case.argv[0]).name
        self.assertTrue(lines[0].startswith(f"{tool}: "), where)
        self.assertNotIn("internal error", lines[0], where)
        names = [n for n in case.names if n]
        self.assertTrue(any(n in lines[0] for n in names), f"names none of {names}: {where}")

    def generate(self, flag, value, refused=True, ranks=1):
        """tpsrun generating 2 tokens of "hi" on the model, but for what flag replaces."""
        argv = [f"{ARGS.bin}/tpsrun", "-q"]
        argv += [] if flag == "-m" else ["-m", ARGS.model]
        argv += [] if flag in ("--prompts-file", "-f") else ["-p", "hi"]
        argv += [] if flag == "-n" else ["-n", "2"]
        return Case(argv + [flag, files(value)], [flag, *ALIASES.get(flag, []), files(value) if value else ""],
                    refused, ranks)

    def test_generate_one_rank(self):
        self.run_cases([self.generate(flag, value, value in bad) for flag, (bad, good) in GENERATE.items()
                        for value in bad + good])

    def test_generate_two_ranks(self):
        # What every rank sees is said once; a sample of each kind of refusal.
        self.run_cases([self.generate(flag, value, ranks=2) for flag, value in [
            ("--ctx", "1e9"), ("--ctx", "2147483647"), ("--batch", "100000000"), ("-t", "100000"),
            ("--kv-size", "1000G"), ("--temp", "nan"), ("-m", "fifo"), ("--seed", "-1"),
            ("--quantize", "experts=q8_0"), ("--kv-type", "q4_1"), ("-f", "device"), ("-f", "/nonexistent")]])

    def test_modes(self):
        m = ["-m", ARGS.model]
        cases = [
            ([*m, "-p", "hi", "--show-analysis"], "--show-analysis"),
            ([*m, "score", "--ids", files("fifo")], files("fifo")),
            ([*m, "score", "--ids", files("device")], files("device")),
            ([*m, "score", "--ids", files("empty"), "--temp", "1"], "--temp"),
            ([*m, "serve", "-p", "hi"], "--prompt"),
            ([*m, "perplexity", "-f", files("fifo")], files("fifo")),
            ([*m, "perplexity", "-f", files("empty")], files("empty")),
            ([*m, "perplexity", "-f", files("empty"), "--chunks", "0"], "--chunks"),
            ([*m, "perplexity", "-f", files("empty"), "--chunks", ""], "--chunks"),
            ([*m, "perplexity", "--kl-base", files("device")], files("device")),
            ([*m, "perplexity", "--kl-base", files("empty")], files("empty")),
            ([*m, "perplexity", "--kl-base", files("empty"), "--chunks", "2"], "--chunks"),
            ([*m, "perplexity", "-f", files("empty"), "--save-logits", files("directory")], files("directory")),
            ([*m, "perplexity", "-f", files("empty"), "--temp", "1"], "--temp"),
            ([*m, "perplexity", "-f", files("empty"), "--kv-type", "int8"], "--kv-type"),
            (["--kv-type", "f16", "place"], "--kv-type"),
            (["tokenize", *m, "--file", files("fifo")], files("fifo")),
            (["tokenize", "-m", files("fifo"), "--text", "hi"], files("fifo")),
            (["tokenize", *m, "--text", ""], "--text"),
        ]
        self.run_cases([Case([f"{ARGS.bin}/tpsrun", "-q", *argv], [name]) for argv, name in cases])

    def test_serve(self):
        # Refused before it listens: a value taken would serve with it (a
        # --timeout of nan or 1e30 ended every request at once, empty).
        values = {
            "--timeout": ["nan", "inf", "1e30", "0", "-1", "abc", "604801"],
            "--max-queue": ["0", "5000", "99999999999"],
            "--port": ["-1", "65536"],
            "--log-requests": ["maybe", "", "ON"],
        }
        serve = [f"{ARGS.bin}/tpsrun", "-q", "-m", ARGS.model, "serve", "--port", "0"]
        cases = [Case([*serve, flag, value], [flag]) for flag, vs in values.items() for value in vs]
        # What failed is said: httplib's bind left errno at 0, "(Success)".
        cases.append(Case([*serve, "--host", "no.such.host.invalid"],
                          ["--host no.such.host.invalid: the host name does not resolve"]))
        self.run_cases(cases)

    def test_tpstopo(self):
        cases = [
            (["--ranks", "100000000"], "ranks"),
            (["-t", "100000000"], "-t"),
            (["--ranks", "-1"], "--ranks"),
            (["--bandwidth", "--bandwidth-mib", "100000000"], "--bandwidth-mib"),
            (["--bandwidth-mib", "64"], "--bandwidth-mib"),
            (["--ctx", "64"], "--ctx"),
            (["--model", files("fifo")], files("fifo")),
            (["--model", files("directory")], files("directory")),
            (["--model", ARGS.model, "--kv-size", "abc"], "--kv-size"),
            (["--model", ARGS.model, "--kv-type", "q4_1"], "--kv-type"),
            (["--kv-type", "f16"], "--kv-type"),
            (["--preset", "999b"], "--preset"),
            (["--preset", "120b", "--model", ARGS.model], "--preset"),
            (["--preset", "120b", "--quantize", "experts=q2_k"], "--quantize"),
        ]
        self.run_cases([Case([f"{ARGS.bin}/tpstopo", *argv], [name]) for argv, name in cases])

    def test_mkmodel(self):
        out = str(Path(SPECIAL["directory"]) / "m.gguf")
        cases = [
            (["--seed", "-1"], "--seed"),
            (["--seed", ""], "--seed"),
            (["--layers", "100000000"], "--layers"),
            (["--embd", "1000000000"], "--embd"),
            (["--experts", "100000"], "--experts"),
            (["--head-dim", "0"], "--head-dim"),
            (["--preset", "nope"], "--preset"),
            (["--type", "attn=Q9_9"], "Q9_9"),
            (["--split-max-size", "12"], "--split-max-size"),
            (["--split-max-size", "17179869184G"], "--split-max-size"),
        ]
        self.run_cases([Case([f"{ARGS.bin}/tps-mkmodel", "-q", "--preset", "tiny", "-o", out, *argv], [name])
                        for argv, name in cases])
        self.assertFalse(Path(out).exists())


ALIASES = {"-n": ["--max-tokens"], "-t": ["--threads"], "-m": ["--model"], "-f": ["--file"]}


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--mpiexec", required=True)
    ARGS, rest = p.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        fifo = Path(tmp) / "fifo"
        os.mkfifo(fifo)
        empty = Path(tmp) / "empty"
        empty.write_text("")
        SPECIAL.update(fifo=str(fifo), device="/dev/zero", directory=tmp, empty=str(empty))
        result = unittest.main(argv=[sys.argv[0], *rest], exit=False)
    sys.exit(0 if result.result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
