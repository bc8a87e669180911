"""Does the README's quick start give the same answer twice? The command run N times in a row.

Runs ``placement solve examples/resnet_tiny_int8.onnx --target cim`` (plus any arguments
after ``--``) ``--times`` times back to back, each a fresh process as a user would start
it, and prints per run the speed-up, the CPU-only latency and the makespan it reported,
its wall time and the 1-minute load average before it; then the spread of the speed-ups
as ``max/min - 1`` and whether they agree within ``--limit`` (default 5 %).

    python benchmarks/quickstart_stability.py [--times 5] [--limit 0.05]
        [--checkouts DIR,DIR] [-- EXTRA ARGS]

The command is the installed ``placement``, run with PYTHONPATH set to each of
``--checkouts`` in turn when given (side by side: run 1 of each, run 2 of each, ...),
e.g. the main branch's checkout beside a change's.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from placement.profiling.host import host_description

ROOT = Path(__file__).resolve().parent.parent
QUICK_START = ["placement", "solve", str(ROOT / "examples" / "resnet_tiny_int8.onnx"),
               "--target", "cim"]  # fmt: skip
_SPEEDUP = re.compile(r"optimized makespan: ([\d.]+) (\w+) +\(speed-up ([\d.]+)x")
_CPU_ONLY = re.compile(r"CPU-only latency: ([\d.]+) (\w+)")


def run_once(extra: list[str], checkout: str | None) -> dict[str, object]:
    load = os.getloadavg()[0]
    env = dict(os.environ, **({"PYTHONPATH": checkout} if checkout else {}))
    start = time.perf_counter()
    proc = subprocess.run([*QUICK_START, *extra], capture_output=True, text=True, check=False,
                          env=env)  # fmt: skip
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"the quick start failed ({proc.returncode}):\n{proc.stderr}")
    speed, cpu = _SPEEDUP.search(proc.stdout), _CPU_ONLY.search(proc.stdout)
    if speed is None or cpu is None:
        raise SystemExit(f"no speed-up in the output:\n{proc.stdout}")
    warned = [ln for ln in proc.stderr.splitlines() if ln.startswith("placement: warning:")]
    return {
        "speedup": float(speed.group(3)),
        "makespan": f"{speed.group(1)} {speed.group(2)}",
        "cpu_only": f"{cpu.group(1)} {cpu.group(2)}",
        "wall": wall,
        "load": load,
        "warned": bool(warned),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--times", type=int, default=5, help="runs in a row (default 5)")
    ap.add_argument("--limit", type=float, default=0.05, help="agreement asked (default 0.05)")
    ap.add_argument("--checkouts", help="comma-separated source trees to run side by side")
    ap.add_argument("extra", nargs="*", help="arguments added to the command (after --)")
    args = ap.parse_args()
    checkouts: list[str | None] = args.checkouts.split(",") if args.checkouts else [None]
    rows = {c: [] for c in checkouts}  # type: dict[str | None, list[dict[str, object]]]
    for _ in range(args.times):
        for c in checkouts:
            rows[c].append(run_once(args.extra, c))
    worst = 0.0
    for c, runs in rows.items():
        print(f"\n{c or 'installed placement'}:")
        print(f"{'run':>4} {'speed-up':>9} {'CPU-only':>11} {'makespan':>11} {'wall s':>7}"
              f" {'load1':>6}  warning")  # fmt: skip
        for i, r in enumerate(runs, 1):
            print(f"{i:>4} {r['speedup']:>8.2f}x {r['cpu_only']:>11} {r['makespan']:>11}"
                  f" {r['wall']:>7.1f} {r['load']:>6.2f}"
                  f"  {'yes' if r['warned'] else ''}")  # fmt: skip
        speedups = [float(r["speedup"]) for r in runs]  # type: ignore[arg-type]
        spread = max(speedups) / min(speedups) - 1
        worst = max(worst, spread)
        verdict = "agree" if spread <= args.limit else "DO NOT agree"
        print(f"max/min - 1: {100 * spread:.1f} % ({verdict} within {100 * args.limit:g} %)")
    host = host_description()
    print(f"command: {' '.join([*QUICK_START[:2], 'examples/resnet_tiny_int8.onnx', *QUICK_START[3:], *args.extra])}")  # noqa: E501
    print(f"host: {host['cpu']} ({host['machine']}, {os.cpu_count()} CPUs); load1 after:"
          f" {os.getloadavg()[0]:.2f}")  # fmt: skip
    return 0 if worst <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
