#!/usr/bin/env python3
"""Smoke test of bench/tpsbench: a --quick run on the tiny model (1 rank and
2 ranks) writes every output file with the fields docs/PERFORMANCE.md relies
on; a missing model, or tpsrun failing, ends in one line naming what went
wrong. Speed is not checked.

  tpsbench_smoke_test.py --tpsbench bench/tpsbench --build build --model build/models/gpt-oss-tiny.gguf
"""

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ARGS = None
SVG = "{http://www.w3.org/2000/svg}"


class QuickRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = Path(cls.tmp.name) / "out"
        cls.done = subprocess.run(
            [sys.executable, ARGS.tpsbench, "--quick", "--model", ARGS.model, "--build", ARGS.build,
             "--out", str(cls.out)], capture_output=True, text=True, timeout=300)
        cls.result = None
        if cls.done.returncode == 0:
            cls.result = json.loads((cls.out / "tpsbench.json").read_text())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.assertEqual(self.done.returncode, 0, f"tpsbench failed: {self.done.stderr[-2000:]}")

    def summary(self, config):
        found = [s for s in self.result["summaries"] if s["config"] == config]
        self.assertEqual(len(found), 1, f"no summary for {config}")
        return found[0]

    def test_prints_the_tables(self):
        for heading in ("## Suite", "## Scaling and roofline", "## Time per decoded token", "## Model check",
                        "## Projection (MODEL, not measured)"):
            self.assertIn(heading, self.done.stdout)
        self.assertEqual(self.done.stdout, (self.out / "report.md").read_text())

    def test_sweeps_one_and_two_ranks(self):
        self.assertEqual([s["config"] for s in self.result["summaries"]], ["1x1", "2x1 tensor"])
        self.assertEqual(len(self.result["runs"]), 4)  # 2 configurations x 2 prompts x 1 repetition

    def test_summary_fields(self):
        for config, ranks in (("1x1", 1), ("2x1 tensor", 2)):
            s = self.summary(config)
            for key in ("prefill_tokens_per_s", "ttft_s", "decode_tokens_per_s"):
                v = s[key]
                self.assertTrue(0 < v["min"] <= v["median"] <= v["max"], f"{config} {key}: {v}")
            self.assertEqual(len(s["peak_rss_mib_by_rank"]), ranks)
            self.assertTrue(all(v > 0 for v in s["peak_rss_mib_by_rank"]))
            self.assertGreater(sum(s["weight_bytes_by_node"].values()), 0)
            self.assertTrue(0 <= s["comm_share"] < 1, s["comm_share"])
            self.assertGreater(s["decode_bytes_per_token"], 0)
            self.assertGreater(s["ceiling_tokens_per_s"], 0)
            self.assertGreater(s["pct_of_ceiling"], 0)
            self.assertGreater(s["decode_speedup"], 0)
            self.assertEqual(set(s["ms_per_token_by_group"]),
                             {"attention", "MoE", "unembedding", "communication", "sampling", "other"})
        self.assertEqual(self.summary("1x1")["decode_speedup"], 1.0)
        self.assertGreater(self.summary("2x1 tensor")["comm_share"], 0)

    def test_machine_and_bandwidth(self):
        mc = self.result["machine"]
        self.assertGreaterEqual(mc["cores"], 1)
        self.assertGreater(mc["bandwidth_gbps_total"], 0)
        self.assertTrue(mc["bandwidth_gbps_by_node"])

    def test_model_check_and_projection(self):
        check = self.result["model_check"]
        self.assertEqual([r["config"] for r in check], ["2x1 tensor"])
        self.assertGreater(check[0]["predicted_tokens_per_s"], 0)
        self.assertGreater(self.result["model"]["latency_s"], 0)
        rows = self.result["projection"]["rows"]
        wheres = {r["where"] for r in rows}
        for where in ("1 socket", "2 sockets, 1 host", "4 sockets, 1 host", "8 sockets, 1 host",
                      "2 hosts x 2 sockets", "4 hosts x 2 sockets"):
            self.assertIn(where, wheres)
        for r in rows:
            self.assertGreater(r["tokens_per_s"], 0)
            self.assertGreater(r["ceiling_tokens_per_s"], 0)

    def test_csv_files(self):
        with open(self.out / "runs.csv") as f:
            runs = list(csv.DictReader(f))
        self.assertEqual(len(runs), 4)
        self.assertEqual({r["prompt"] for r in runs}, {"short-en", "short-chat"})
        for r in runs:
            self.assertGreater(float(r["decode_tokens_per_s"]), 0)
        with open(self.out / "summary.csv") as f:
            summary = list(csv.DictReader(f))
        self.assertEqual([r["config"] for r in summary], ["1x1", "2x1 tensor"])
        for key in ("prefill_tokens_per_s_median", "ttft_s_median", "decode_tokens_per_s_median",
                    "pct_of_ceiling", "comm_share", "peak_rss_mib_by_rank", "weight_bytes_by_node"):
            self.assertTrue(all(r[key] != "" for r in summary), key)

    def test_plots(self):
        scaling = ElementTree.parse(self.out / "tokens_per_s_vs_ranks.svg").getroot()
        self.assertEqual(scaling.tag, SVG + "svg")
        self.assertGreaterEqual(len(scaling.findall(SVG + "polyline")), 3)  # measured, roofline, model
        parts = ElementTree.parse(self.out / "time_per_token.svg").getroot()
        labels = {t.text for t in parts.iter(SVG + "text")}
        self.assertTrue({"1x1", "2x1 tensor", "attention", "MoE", "unembedding", "communication",
                         "sampling"} <= labels, labels)


class Errors(unittest.TestCase):
    def test_missing_model_is_one_line_naming_it(self):
        missing = "/nonexistent/model.gguf"
        done = subprocess.run([sys.executable, ARGS.tpsbench, "--model", missing, "--build", ARGS.build],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 1)
        self.assertEqual(done.stderr.count("\n"), 1, done.stderr)
        self.assertIn(missing, done.stderr)

    def test_failing_tpsrun_is_one_line_with_its_message(self):
        # The header passes tpsbench's own check; tpsrun finds the cut.
        with tempfile.TemporaryDirectory() as tmp:
            cut = Path(tmp) / "cut.gguf"
            cut.write_bytes(Path(ARGS.model).read_bytes()[:2_000_000])
            done = subprocess.run([sys.executable, ARGS.tpsbench, "--quick", "--model", str(cut), "--build",
                                   ARGS.build, "--out", str(Path(tmp) / "out")],
                                  capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 1)
        last = done.stderr.splitlines()[-1]
        self.assertRegex(last, r"^tpsbench: tpsrun \(1x1, prompt short-en\) failed: tpsrun: .*cut\.gguf.*truncated")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tpsbench", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--model", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
