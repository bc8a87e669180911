"""How reproducible is a host profile on a loaded machine? Three statistics of the same runs.

Profiles each model ``--profiles`` times (default 5) while ``--busy`` child processes
(default 1) each keep a core busy (``python -c "while True: pass"``, killed at the
end). Every profile is one :func:`~placement.profiling.ort.measure.measure_runs`
call (``--runs`` measured runs in rounds, after ``--warmup`` runs); from the same
per-run, per-operator times it computes the CPU-only total with

* the oldest statistic: per operator the median over all runs (the first profiler,
  which took its runs back to back), summed over operators;
* the former statistic: per operator the median over rounds of the per-round minimum
  (``median-of-round-minima``), summed over operators;
* the profile's statistic: per operator the minimum over all runs
  (``minimum-over-runs``), summed (the profile's kernel_total).

It prints per profile both totals, the profile's total spread and the load the
machine carried while measuring (other processes' share of all CPUs, from
``/proc/stat`` minus this process's CPU time), then per method ``max/min - 1``
across the profiles, and the host.

    python benchmarks/profile_stability.py [MODEL ...] [--profiles 5] [--runs 20]
        [--warmup 5] [--busy 1] [--pause 1.0] [--round-pause 0.005]

MODEL is an ONNX path or a network name of ``placement.networks.zoo`` (``resnet18``,
``yolov5n``, ...: its int8 build, generated and cached on first use). The bundled
``examples/resnet_tiny_int8.onnx`` is always profiled first.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from placement.networks.zoo import NETWORKS, network_path
from placement.profiling.host import host_description
from placement.profiling.ort.measure import Measurement, measure_runs, summarize_runs

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "examples" / "resnet_tiny_int8.onnx"


def resolve(spec: str) -> Path:
    """An ONNX path, or a zoo network name (its int8 build)."""
    if spec in NETWORKS:
        return network_path(spec, int8=True)
    path = Path(spec)
    if not path.is_file():
        raise SystemExit(f"{spec}: neither an ONNX file nor a network ({', '.join(NETWORKS)})")
    return path


def old_total(m: Measurement) -> float:
    """The oldest statistic on the same runs: per node the median over runs, summed."""
    return math.fsum(statistics.median(run[name] for run in m.per_run) for name in m.names)


def rounds_total(m: Measurement) -> float:
    """The former statistic on the same runs: per node the median of the round minima."""
    rounds = m.node_rounds()
    return math.fsum(statistics.median(min(r) for r in rounds[name]) for name in m.names)


def cpu_seconds() -> tuple[float, float] | None:
    """Busy and total CPU seconds of all CPUs since boot (``/proc/stat``), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            values = [int(v) for v in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    total = sum(values)
    return (total - values[3] - values[4]) / os.sysconf("SC_CLK_TCK"), total / os.sysconf(
        "SC_CLK_TCK"
    )


def others_busy(before: tuple[float, float] | None, own: float) -> float | None:
    """Share of all CPUs other processes kept busy since ``before`` (own CPU time removed)."""
    after = cpu_seconds()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return max(0.0, min(1.0, (after[0] - before[0] - own) / (after[1] - before[1])))


def start_busy(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop_busy(children: list[subprocess.Popen[bytes]]) -> None:
    for child in children:
        child.kill()
    for child in children:
        child.wait()


def profile_rows(
    path: Path, profiles: int, runs: int, warmup: int, pause: float, round_pause: float
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(profiles):
        if i:
            time.sleep(pause)
        own, sample = time.process_time(), cpu_seconds()
        m = measure_runs(path, runs=runs, warmup=warmup, round_pause=round_pause)
        busy = others_busy(sample, time.process_time() - own)
        profile = summarize_runs(m)
        meta = profile.metadata
        rows.append(
            {
                "old": old_total(m),
                "new": profile.kernel_total,
                "former": rounds_total(m),
                "spread": meta["total_spread"],
                "others_busy": busy,
                "loadavg": meta["machine_load"]["loadavg_before"],
                "warned": bool(meta["warnings"]),
                "rounds": meta["rounds"],
                "per_round": meta["runs_per_round"],
            }
        )
    return rows


def print_table(
    path: Path, rows: list[dict[str, object]], runs: int, warmup: int, round_pause: float
) -> None:
    first = rows[0]
    print(
        f"\n{path.name}: {runs} runs = {first['rounds']} rounds of <= {first['per_round']}"
        f" ({1e3 * round_pause:g} ms apart), warm-up {warmup}"
    )
    print(f"{'profile':>9} {'old ms':>9} {'former ms':>9} {'min ms':>9} {'spread':>7}"
          f" {'others':>7} {'load1':>6}  warning")  # fmt: skip
    for i, row in enumerate(rows, 1):
        busy = "n/a" if row["others_busy"] is None else f"{100 * row['others_busy']:.0f}%"
        load = "n/a" if row["loadavg"] is None else f"{row['loadavg']:.2f}"
        print(
            f"{i:>9} {1e3 * row['old']:>9.3f} {1e3 * row['former']:>9.3f}"
            f" {1e3 * row['new']:>9.3f}"
            f" {100 * row['spread']:>6.1f}% {busy:>7} {load:>6}  {'yes' if row['warned'] else ''}"
        )
    old = [float(r["old"]) for r in rows]
    former = [float(r["former"]) for r in rows]
    new = [float(r["new"]) for r in rows]
    print(
        f"{'max/min-1':>9} {100 * (max(old) / min(old) - 1):>8.1f}%"
        f" {100 * (max(former) / min(former) - 1):>8.1f}%"
        f" {100 * (max(new) / min(new) - 1):>8.1f}%"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="*", help="ONNX paths or zoo network names")
    ap.add_argument("--profiles", type=int, default=5, help="profiles per model (default 5)")
    ap.add_argument("--runs", type=int, default=20, help="measured runs per profile")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up runs per profile")
    ap.add_argument("--busy", type=int, default=1, help="busy-loop child processes (default 1)")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between profiles")
    ap.add_argument(
        "--round-pause", type=float, default=0.005, help="seconds between rounds (default 0.005)"
    )
    args = ap.parse_args()
    paths = [BUNDLED, *(resolve(spec) for spec in args.models)]  # build before loading
    host = host_description()
    children = start_busy(args.busy)
    try:
        time.sleep(0.5)  # let the children get going
        sample, own = cpu_seconds(), time.process_time()
        for path in paths:
            rows = profile_rows(
                path, args.profiles, args.runs, args.warmup, args.pause, args.round_pause
            )
            print_table(path, rows, args.runs, args.warmup, args.round_pause)
        overall = others_busy(sample, time.process_time() - own)
    finally:
        stop_busy(children)
    cpus = os.cpu_count() or 1
    share = "n/a" if overall is None else f"{100 * overall:.0f}% of {cpus} CPUs"
    print(
        f"\nhost: {host['cpu']} ({host['machine']}, {cpus} CPUs, {host['system']},"
        f" Python {host['python']}); {args.busy} busy-loop child process(es);"
        f" other processes' load while measuring: {share}"
    )
    print(
        "old: per operator the median over all runs; former: per operator the median over"
        " rounds of the per-round minimum (the former statistic); min: per operator the"
        " minimum over all runs (the profile's); all summed over operators, from the same runs."
        " spread: relative IQR of the per-round totals; others: other processes' share of"
        " all CPUs during the profile; load1: 1-minute load average before it"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
