"""Overhead of reporting to `heaphook agent`, beside jemalloc's own profiling cost.

Runs the bench's python and node workloads (packages/bench/workloads/json_roundtrip.*) under
each configuration, interleaved round by round, and prints the median CPU time (user + sys of
the workload process, from wait4) of each, and its ratio to the configuration it adds to:

  glibc              no preload
  agent              libheaphook_agent.so over glibc, reporting to a running agent (512 KiB)
  tlsf               libheaphook_tlsf.so
  agent+tlsf         libheaphook_agent.so over TLSF, reporting to a running agent (512 KiB)
  jemalloc           libjemalloc.so.2
  jemalloc+prof      the same with MALLOC_CONF=prof:true (its default lg_prof_sample:19, 512 KiB)

The agent's own CPU time over all the agent runs is printed too (it runs beside the program).

Usage: python3 packages/agent/scripts/overhead.py [--rounds 5] [--size 10000]
Build first (npx nx build agent tlsf); needs libjemalloc2.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.normpath(os.path.join(here, "..", "..", ".."))
agent_lib = os.path.join(repo, "packages/agent/build/Release/libheaphook_agent.so")
tlsf_lib = os.path.join(repo, "packages/tlsf/build/Release/libheaphook_tlsf.so")
jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
workloads = {
    # the interpreter itself, not a pyenv shim in front of it (its bash would be measured too)
    "python-json": [sys.executable, os.path.join(repo, "packages/bench/workloads/json_roundtrip.py")],
    "node-json": ["node", os.path.join(repo, "packages/bench/workloads/json_roundtrip.mjs")],
}


def cpu_seconds(argv, env):
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or b'"ok":true' not in out:
        sys.exit(f"{argv} failed ({proc.returncode}): {err.decode()[-500:]}")
    return usage.ru_utime + usage.ru_stime


def agent_cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=10000)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="heaphook-agent-overhead-")
    sock = os.path.join(tmp, "agent.sock")
    agent = subprocess.Popen(
        ["node", os.path.join(repo, "packages/core/bin/heaphook.js"), "agent", "--socket", sock, "--http", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
    )
    line = agent.stderr.readline().decode()
    if "listening" not in line:
        sys.exit(f"agent did not start: {line}")
    base = dict(os.environ)
    base.pop("LD_PRELOAD", None)
    reporting = {"HEAPHOOK_AGENT": f"unix:{sock}"}
    configs = {
        "glibc": {},
        "agent": {"LD_PRELOAD": agent_lib, **reporting},
        "tlsf": {"LD_PRELOAD": tlsf_lib},
        "agent+tlsf": {"LD_PRELOAD": f"{agent_lib} {tlsf_lib}", **reporting},
        "jemalloc": {"LD_PRELOAD": jemalloc},
        "jemalloc+prof": {"LD_PRELOAD": jemalloc, "MALLOC_CONF": "prof:true"},
    }
    times = {(w, c): [] for w in workloads for c in configs}
    agent_seconds = 0.0
    for r in range(args.rounds):
        for w, argv in workloads.items():
            for c, extra in configs.items():
                before = agent_cpu(agent.pid)
                times[(w, c)].append(cpu_seconds(argv + ["--size", str(args.size)], {**base, **extra}))
                if "HEAPHOOK_AGENT" in extra:
                    agent_seconds += agent_cpu(agent.pid) - before
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    agent.send_signal(signal.SIGTERM)
    agent.wait()
    pairs = {"agent": "glibc", "agent+tlsf": "tlsf", "jemalloc+prof": "jemalloc"}
    result = {}
    for w in workloads:
        for c in configs:
            med = statistics.median(times[(w, c)])
            entry = {"median_cpu_s": round(med, 3)}
            if c in pairs:
                entry["ratio_to_" + pairs[c]] = round(med / statistics.median(times[(w, pairs[c])]), 3)
            result[f"{w} {c}"] = entry
    agent_runs = args.rounds * len(workloads) * 2
    result["agent process cpu_s per reporting run"] = round(agent_seconds / agent_runs, 3)
    print(json.dumps(result, indent=2))


main()
