#!/usr/bin/env python3
"""tps on a real multi-node kernel: boots scripts/numa-guest (QEMU, N
sockets of one CPU, one NUMA node each) once, runs every command of steps()
inside it, and checks their output, read back from the guest's console:
the kernel and tpstopo see N nodes; plain `mpirun -np N` puts rank r on node
r; each rank's weight pages are on its node (the kernel's move_pages answer
tpsrun reports); every split gives the one-rank run's greedy tokens; a
binding made before tps started (mpirun --bind-to, numactl) is kept and
reported as the kernel has it; tpstopo --bandwidth measures every node.
A step that did not run fails its check: nothing passes without a boot.

  numa_guest_test.py --numa-guest scripts/numa-guest --build build [--nodes 2] [--node-mib 1024]
"""

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

ARGS = None
SPLITS = ["tensor", "experts", "layers"]
TOKENS = 4  # enough to tell the splits apart; each costs ~0.5 s in emulation


def steps(n):
    """What the guest runs, by name; the last node is the one a single rank
    is bound to by hand (tps's own placement would pick node 0)."""
    last = n - 1
    gen = f"tpsrun -m /models/gpt-oss-tiny.gguf -p Hello -n {TOKENS} --temp 0 --json"
    affinity = "echo rank $OMPI_COMM_WORLD_RANK $(grep Cpus_allowed_list /proc/self/status)"
    return {
        "numactl": "numactl -H",
        "topology": "tpstopo --json",
        "place": f"mpirun -np {n} tpsrun place",
        "reference": gen,  # one rank, no mpirun
        **{f"split_{s}": f"mpirun -np {n} {gen} --split {s}" for s in SPLITS},
        "bind_to_core": f"mpirun -np {n} --bind-to core tpsrun place",
        "bind_to_core_kernel": f"mpirun -np {n} --bind-to core sh -c {shlex.quote(affinity)}",
        "cpu_set": f"mpirun -np 1 --bind-to core --cpu-set {last} {gen}",
        "numactl_rank": f"numactl --cpunodebind={last} --membind={last} {gen}",
        "numactl_under_mpirun": f"mpirun -np 1 numactl --cpunodebind={last} --membind={last} tpsrun place",
        "membind_alone": f"numactl --membind={last} tpsrun place",
        "cpu_set_plan": f"mpirun -np 1 --cpu-set {last} tpsrun place",
        "bandwidth": "tpstopo --bandwidth --bandwidth-mib 32 --repetitions 2 --json",
    }


def guest_script(n):
    # Each step's stdout and stderr apart, between markers the host parses.
    lines = ['step() { echo "@@@ $1: $2"; sh -c "$2" > /tmp/out 2> /tmp/err; rc=$?',
             '  echo "@@@ stdout"; cat /tmp/out; echo; echo "@@@ stderr"; cat /tmp/err; echo; echo "@@@ end $1 rc=$rc"; }']
    lines += [f"step {name} {shlex.quote(cmd)}" for name, cmd in steps(n).items()]
    return "\n".join(lines) + "\n"


def parse_console(text):
    out = {}
    for m in re.finditer(r"^@@@ (\w+): .*?\n@@@ stdout\n(.*?)\n@@@ stderr\n(.*?)\n@@@ end \1 rc=(\d+)$", text,
                         re.S | re.M):
        out[m[1]] = {"stdout": m[2], "stderr": m[3], "rc": int(m[4])}
    return out


class Guest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.n = ARGS.nodes
        with tempfile.NamedTemporaryFile("w", suffix=".sh") as script:
            script.write(guest_script(cls.n))
            script.flush()
            done = subprocess.run([ARGS.numa_guest, "--build", ARGS.build, "--nodes", str(cls.n), "--node-mib",
                                   str(ARGS.node_mib), "--timeout", str(ARGS.timeout), script.name],
                                  stdout=subprocess.PIPE, text=True, errors="replace")
        cls.console = done.stdout.replace("\r", "")
        cls.status = done.returncode
        cls.steps = parse_console(cls.console)
        print(cls.console, flush=True)

    def step(self, name, rc=0):
        self.assertIn(name, self.steps, f"step {name} did not run in the guest")
        s = self.steps[name]
        self.assertEqual(s["rc"], rc, f"{steps(self.n)[name]}:\n{s['stdout']}\n{s['stderr']}")
        return s

    def rank_line(self, text, r, ranks):
        # tpsrun's start-up line for rank r (rank_setup.cpp).
        m = re.search(rf"^tpsrun: host \S+ rank {r}/{ranks}: (.*)$", text, re.M)
        self.assertTrue(m, f"no start-up line for rank {r}/{ranks} in:\n{text}")
        return m[1]

    def generated(self, name, nodes):
        """Checks a generation step: rank r on nodes[r], its weight pages
        there; returns the token ids."""
        s = self.step(name)
        j = json.loads(s["stdout"])
        self.assertEqual(j["ranks"], len(nodes))
        self.assertEqual(len(j["generated_ids"]), TOKENS)
        for r, node in enumerate(nodes):
            self.assertEqual(j["per_rank"][r]["numa_node"], node, f"{name}: rank {r}")
            if j["per_rank"][r]["weight_bytes"] < 4096:
                # A rank with no layers (more ranks than the tiny model has)
                # holds less than a page: tpsrun samples whole pages only.
                continue
            self.assertEqual(j["per_rank"][r]["weight_pages_on_node"], 1.0, f"{name}: rank {r}")
            self.assertRegex(s["stderr"], rf"rank {r}/{len(nodes)}: .* 100.0% of sampled pages on NUMA node {node};")
        return j["generated_ids"]

    def test_guest_booted_and_ran_every_step(self):
        self.assertIn("numa-guest: booted", self.console, f"qemu exit {self.status}: the guest did not boot")
        self.assertRegex(self.console, r"numa-guest: done rc=\d+", "the guest script did not finish")
        self.assertEqual(self.status, 0)
        self.assertEqual(sorted(self.steps), sorted(steps(self.n)))

    def test_kernel_sees_one_node_per_cpu(self):
        s = self.step("numactl")
        self.assertIn(f"available: {self.n} nodes (0-{self.n - 1})", s["stdout"])
        for i in range(self.n):
            self.assertRegex(s["stdout"], rf"(?m)^node {i} cpus: {i}$")

    def test_tpstopo_sees_each_socket_and_node(self):
        m = json.loads(self.step("topology")["stdout"])["machine"]
        self.assertEqual((m["summary"]["packages"], m["summary"]["numa_nodes"]), (self.n, self.n))
        for i, node in enumerate(m["numa_nodes"]):
            self.assertEqual(node["os_index"], i)
            self.assertEqual(m["packages"][node["package"]]["os_index"], i)
            self.assertEqual([m["cores"][c]["pus"] for c in node["cores"]], [[i]])
            # The node's RAM less what the kernel keeps for itself.
            self.assertGreater(node["memory_bytes"], 0.8 * ARGS.node_mib * 2**20)
            self.assertLessEqual(node["memory_bytes"], ARGS.node_mib * 2**20)

    def test_plain_mpirun_puts_rank_r_on_node_r(self):
        s = self.step("place")
        for r in range(self.n):
            self.assertRegex(self.rank_line(s["stderr"], r, self.n),
                             rf"^NUMA node {r} \(package {r}\), PUs {r}, 1 thread\(s\), memory on node {r}; tps placement")

    def test_every_split_gives_the_one_rank_tokens_from_each_nodes_memory(self):
        reference = self.generated("reference", [0])
        for split in SPLITS:
            with self.subTest(split=split):
                self.assertEqual(self.generated(f"split_{split}", list(range(self.n))), reference)

    def test_mpirun_bind_to_core_is_kept_and_reported_as_the_kernel_has_it(self):
        s = self.step("bind_to_core")
        kernel = self.step("bind_to_core_kernel")["stdout"]
        for r in range(self.n):
            # What the kernel gives rank r's process; one CPU per node here,
            # so node, package and PU have the same number.
            m = re.search(rf"^rank {r} Cpus_allowed_list: (\S+)$", kernel, re.M)
            self.assertTrue(m, kernel)
            pus = m[1]
            self.assertRegex(self.rank_line(s["stderr"], r, self.n),
                             rf"^NUMA node {pus} \(package {pus}\), PUs {pus}, 1 thread\(s\), memory on node {pus}; "
                             r"kept mpirun's binding \(--bind-to core\)$")

    def test_a_rank_bound_by_mpirun_elsewhere_stays_there(self):
        last = self.n - 1
        self.assertEqual(self.generated("cpu_set", [last]), self.generated("reference", [0]))
        self.assertRegex(self.rank_line(self.steps["cpu_set"]["stderr"], 0, 1),
                         rf"^NUMA node {last} .*PUs {last}, .*memory on node {last}; kept mpirun's binding")

    def test_numactl_around_one_rank_is_kept(self):
        last = self.n - 1
        self.assertEqual(self.generated("numactl_rank", [last]), self.generated("reference", [0]))
        self.assertRegex(self.rank_line(self.steps["numactl_rank"]["stderr"], 0, 1),
                         rf"^NUMA node {last} .*PUs {last}, .*memory on node {last}; "
                         r"kept the existing CPU affinity \(taskset/numactl\); memory kept on node "
                         rf"{last} \(the memory policy it started with\)$")

    def test_memory_policy_is_kept_under_mpirun_and_alone(self):
        # Under mpirun's default binding tps cannot tell numactl's CPUs from
        # mpirun's, but the memory policy is numactl's: the rank follows it.
        last = self.n - 1
        for step in ("numactl_under_mpirun", "membind_alone"):
            self.assertRegex(self.rank_line(self.step(step)["stderr"], 0, 1),
                             rf"^NUMA node {last} .*PUs {last}, .*memory on node {last}; on the cores of node {last}; "
                             rf"memory kept on node {last}", step)

    def test_mpirun_cpu_set_is_where_tps_places(self):
        last = self.n - 1
        self.assertRegex(self.rank_line(self.step("cpu_set_plan")["stderr"], 0, 1),
                         rf"^NUMA node {last} .*PUs {last}, .*memory on node {last}; tps placement")

    def test_bandwidth_is_measured_on_each_node(self):
        bw = {tuple(b["numa_nodes_os_index"]): b for b in json.loads(self.step("bandwidth")["stdout"])["bandwidth"]}
        for nodes in [(i,) for i in range(self.n)] + [tuple(range(self.n))]:
            self.assertIn(nodes, bw)
            self.assertGreater(bw[nodes]["best_gb_per_s"], 0)
        for i in range(self.n):
            self.assertEqual(bw[(i,)]["scope"], f"node {i}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--numa-guest", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--node-mib", type=int, default=1024)
    parser.add_argument("--timeout", type=int, default=600, help="seconds the guest may run")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
