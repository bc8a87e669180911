"""The CIM paper's host-dependent claims (Section V), checked with the analytical host model.

The paper profiles its two hosts (an ARM Cortex-A72 and an AMD Ryzen 9 3900X); this
machine is neither, so its profiles say nothing about them. This script takes the host
latencies of both hosts from the host model (presets ``arm-a72-model`` and
``x86-ryzen-model``, an estimate; constants and sources in
``placement/hardware/presets/{arm-a72,x86-ryzen}.toml``), builds the CIM instances of the
paper's four int8 networks on its DSE grid (25/50/100/200 crossbars x 50/100/500/1000 ns
MVM latency) and solves each with ``placement.cim.pipeline.solve(instance,
time_limit=...)`` (product defaults otherwise; as ``placement sweep`` does, each point also
starts from the placement of the next smaller crossbar budget at the same MVM latency,
which fits and can only get faster, so results are monotone in the budget). Then, per
claim, it prints the paper's value, ours, and a verdict:

(a) ARM's ResNet-18 peak speed-up far above x86's (paper 30.9x vs 7.3x);
(b) x86 at >= 500 ns MVM latency near 1x ("offloading is no longer beneficial");
(c) ResNet-18 on ARM saturating by 100 crossbars;
(d) YOLOv5n offload counts 16 -> 59 -> 59 at 25/100/200 crossbars, ARM, 50 ns (the paper's
    YOLOv5n has 251 operators, ours 244: the counts are compared as they are).

Verdicts: "holds" (the claim and its numbers, within the tolerance stated per claim),
"shape only" (the trend holds, the numbers do not), "differs" (the trend does not hold).

    python benchmarks/paper_host_claims.py [--time-limit 60] [--yolo-time-limit 60]
        [--networks resnet18,resnet50,mobilenetv2,yolov5n] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass

from placement.cim.instance import cim_instance
from placement.cim.pipeline import solve
from placement.errors import PlacementError
from placement.graph import load_graph
from placement.hardware.cim import load_hardware, with_overrides
from placement.networks.zoo import NETWORKS, network_path

HOSTS = {"ARM": "arm-a72-model", "x86": "x86-ryzen-model"}
CROSSBARS = (25, 50, 100, 200)
T_MVM_NS = (50.0, 100.0, 500.0, 1000.0)


@dataclass
class Point:
    network: str
    host: str
    crossbars: int
    t_mvm_ns: float
    status: str
    operators: int = 0
    offloaded: int | None = None
    cpu_only_s: float | None = None
    makespan_s: float | None = None
    speedup: float | None = None
    gap: float | None = None
    seconds: float = 0.0
    message: str = ""
    # The CIM-capable operator that gains most on CIM (largest T_host - T_acc).
    best_op: str = ""
    best_op_host_s: float = 0.0
    best_op_acc_s: float = 0.0
    crossbars_all: int = 0  # crossbars every CIM-capable operator needs together


def run_grid(networks: list[str], time_limit: float, yolo_time_limit: float) -> list[Point]:
    points = []
    for net in networks:
        graph = load_graph(network_path(net, int8=True))
        limit = yolo_time_limit if net == "yolov5n" else time_limit
        for host, preset in HOSTS.items():
            base = load_hardware(preset)
            for t in T_MVM_NS:
                previous = None  # the schedule at the next smaller budget: a start
                for c in CROSSBARS:
                    hw = with_overrides(base, crossbars=c, t_mvm_ns=t)
                    tick = time.perf_counter()
                    try:
                        inst = cim_instance(graph, None, hw.cim, host=hw.host)
                    except PlacementError as exc:
                        points.append(Point(net, host, c, t, "error", message=str(exc)))
                        continue
                    placed = solve(inst, time_limit=limit,
                                   starts=[previous] if previous is not None else ())  # fmt: skip
                    sched = placed.schedule
                    previous = sched or previous
                    p = Point(net, host, c, t, placed.result.status.value, len(inst.operators),
                              cpu_only_s=placed.cpu_only, gap=placed.result.gap,
                              seconds=time.perf_counter() - tick)  # fmt: skip
                    capable = [op for op in inst.operators if op.supported]
                    best = max(capable, key=lambda op: op.t_host - (op.t_acc or 0.0))
                    p.best_op, p.best_op_host_s = best.name, best.t_host
                    p.best_op_acc_s = best.t_acc or 0.0
                    p.crossbars_all = sum(op.crossbars for op in capable)
                    if sched is not None:
                        p.makespan_s = sched.makespan
                        p.speedup = placed.speedup
                        p.offloaded = sum(1 for on_host in sched.on_host.values() if not on_host)
                    points.append(p)
                    print(f"  {net:<12}{host:<5}C={c:<4}{t:>6g} ns  {p.status:<11}"
                          f" speed-up {fmt_x(p.speedup):>7}  offloaded {p.offloaded}/{p.operators}"
                          f"  gap {fmt_gap(p.gap)}  {p.seconds:.1f} s", file=sys.stderr, flush=True)
    return points


def fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def fmt_gap(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{100 * v:.2g}%"


def pick(points: list[Point], **where) -> list[Point]:
    return [p for p in points if all(getattr(p, k) == v for k, v in where.items())]


def one(points: list[Point], **where) -> Point | None:
    found = pick(points, **where)
    return found[0] if found else None


def proven(ps: list[Point]) -> str:
    unproven = [p for p in ps if p.status != "optimal"]
    if not unproven:
        return ""
    worst = max((p.gap for p in unproven if p.gap is not None), default=None)
    return f" ({len(unproven)} of {len(ps)} not proven optimal, gap up to {fmt_gap(worst)})"


# --------------------------------------------------------------------------- claims


def claim_a(points: list[Point]) -> tuple[str, str, str, str]:
    arm = [p for p in pick(points, network="resnet18", host="ARM") if p.speedup]
    x86 = [p for p in pick(points, network="resnet18", host="x86") if p.speedup]
    if not arm or not x86:
        return ("ResNet-18 peak speed-up, ARM vs x86", "30.9x vs 7.3x (4.2x apart)", "-",
                "differs: not computed")  # fmt: skip
    a, x = max(arm, key=lambda p: p.speedup), max(x86, key=lambda p: p.speedup)
    ratio = a.speedup / x.speedup
    ours = (f"{a.speedup:.1f}x vs {x.speedup:.1f}x ({ratio:.1f}x apart; ARM at C={a.crossbars},"
            f" {a.t_mvm_ns:g} ns, x86 at C={x.crossbars}, {x.t_mvm_ns:g} ns){proven([a, x])}")
    close = all(0.67 <= ours_v / paper_v <= 1.5 for ours_v, paper_v in
                ((a.speedup, 30.9), (x.speedup, 7.3)))  # fmt: skip
    if ratio >= 2 and close:
        verdict = "holds: ARM far above x86, both within a factor 1.5 of the paper"
    elif ratio >= 2:
        verdict = ("shape only: ARM far above x86 (>= 2x), but the values are more than a factor"
                   " 1.5 from the paper's")  # fmt: skip
    else:
        verdict = f"differs: ARM's peak is only {ratio:.2f}x x86's"
    return "ResNet-18 peak speed-up, ARM vs x86", "30.9x vs 7.3x (4.2x apart)", ours, verdict


def claim_b(points: list[Point]) -> tuple[str, str, str, str]:
    slow = [p for p in pick(points, network="resnet18", host="x86")
            if p.t_mvm_ns >= 500 and p.speedup]  # fmt: skip
    if not slow:
        return ("x86, ResNet-18, MVM >= 500 ns", "~1x (offloading no longer beneficial)", "-",
                "differs: not computed")  # fmt: skip
    per_t = {t: max(p.speedup for p in slow if p.t_mvm_ns == t) for t in (500.0, 1000.0)}
    fast = max((p.speedup for p in pick(points, network="resnet18", host="x86", t_mvm_ns=50.0)
                if p.speedup), default=float("nan"))  # fmt: skip
    ours = (f"best over crossbars: {per_t[500.0]:.2f}x at 500 ns, {per_t[1000.0]:.2f}x at"
            f" 1000 ns (vs {fast:.2f}x at 50 ns){proven(slow)}")
    top = max(per_t.values())
    ref = one(points, network="resnet18", host="x86", crossbars=200, t_mvm_ns=1000.0)
    why = ""
    if ref is not None and ref.best_op:
        why = (f"; at 1000 ns the operator that gains most, {ref.best_op}, takes"
               f" {ref.best_op_acc_s * 1e6:.0f} us on the crossbars vs"
               f" {ref.best_op_host_s * 1e3:.2f} ms on the modelled host: few MVMs of a large"
               " weight matrix stay cheap on CIM whatever the MVM latency")  # fmt: skip
    if top < 1.25:
        verdict = "holds: below 1.25x at 500 and 1000 ns"
    elif top < 2 and per_t[1000.0] <= per_t[500.0] < fast:
        verdict = ("shape only: speed-ups fall towards 1x with the MVM latency but stay above"
                   f" 1.25x{why}")  # fmt: skip
    else:
        verdict = f"differs: offloading still pays at >= 500 ns{why}"
    return "x86, ResNet-18, MVM >= 500 ns", "~1x (offloading no longer beneficial)", ours, verdict


def claim_c(points: list[Point]) -> tuple[str, str, str, str]:
    rows, worst, grows = [], 0.0, True
    for t in T_MVM_NS:
        s = {c: (p.speedup if (p := one(points, network="resnet18", host="ARM", crossbars=c,
                                        t_mvm_ns=t)) else None) for c in CROSSBARS}  # fmt: skip
        if s[100] is None or s[200] is None:
            continue
        change = s[200] / s[100] - 1
        worst = max(worst, abs(change))
        grows &= s[50] is None or s[100] > s[50] * 1.02
        rows.append(f"{t:g} ns: " + "/".join(fmt_x(s[c]) for c in CROSSBARS))
    if not rows:
        return "ResNet-18, ARM: saturation", "saturates by 100 crossbars", "-", "differs: none"
    ps = pick(points, network="resnet18", host="ARM")
    ours = f"C=25/50/100/200 -> {'; '.join(rows)}{proven(ps)}"
    need = max((p.crossbars_all for p in ps), default=0)
    why = (f"; every CIM-capable operator of our ResNet-18 needs {need} crossbars of 256 x 256"
           " together (Eq. 1), so it cannot saturate before that budget") if need > 100 else ""
    if worst <= 0.02 and grows:
        verdict = "holds: 100 -> 200 crossbars changes nothing (<= 2 %), 50 -> 100 still gains"
    elif worst <= 0.02:
        verdict = "shape only: saturated by 100 crossbars, but already by 50"
    elif worst <= 0.10:
        verdict = f"shape only: 100 -> 200 crossbars still gains up to {100 * worst:.0f} %{why}"
    else:
        verdict = f"differs: 100 -> 200 crossbars gains up to {100 * worst:.0f} %{why}"
    return "ResNet-18, ARM: saturation", "saturates by 100 crossbars (30.9x at 100 and 200)", \
        ours, verdict


def claim_d(points: list[Point]) -> tuple[str, str, str, str]:
    paper = {25: 16, 100: 59, 200: 59}
    ps = {c: one(points, network="yolov5n", host="ARM", crossbars=c, t_mvm_ns=50.0)
          for c in paper}  # fmt: skip
    if any(p is None or p.offloaded is None for p in ps.values()):
        return ("YOLOv5n, ARM, 50 ns: offloaded", "16 -> 59 -> 59 (of 251)", "-",
                "differs: not computed")  # fmt: skip
    counts = {c: p.offloaded for c, p in ps.items() if p is not None}
    n = next(p.operators for p in ps.values() if p is not None)
    lat = {c: p.makespan_s for c, p in ps.items() if p is not None}
    ours = (f"{counts[25]} -> {counts[100]} -> {counts[200]} (of {n}); makespan"
            f" {lat[25] * 1e3:.0f} -> {lat[100] * 1e3:.0f} -> {lat[200] * 1e3:.0f} ms"
            f" (paper 270 -> 127 ms at 25 -> 100){proven(list(ps.values()))}")  # type: ignore[arg-type]
    close = all(abs(counts[c] - paper[c]) <= max(3, 0.2 * paper[c]) for c in paper)
    shape = counts[100] >= 2 * counts[25] and abs(counts[200] - counts[100]) <= 0.1 * counts[100]
    if close and shape:
        verdict = "holds: counts within 20 % of the paper's, flat from 100 to 200"
    elif shape:
        verdict = "shape only: a large jump 25 -> 100 and flat 100 -> 200, other counts"
    else:
        verdict = "differs: not a jump then a plateau"
    return "YOLOv5n, ARM, 50 ns: offloaded", "16 -> 59 -> 59 (of 251)", ours, verdict


def further(points: list[Point]) -> list[tuple[str, str, str]]:
    """Other host-dependent numbers of Section V, paper beside ours (no verdict)."""
    out = []

    def best(net: str, host: str, t: float) -> str:
        ps = [p for p in pick(points, network=net, host=host, t_mvm_ns=t) if p.speedup]
        return fmt_x(max(p.speedup for p in ps)) if ps else "-"

    def count(host: str, t: float, c: int) -> str:
        p = one(points, network="yolov5n", host=host, crossbars=c, t_mvm_ns=t)
        return "-" if p is None or p.offloaded is None else str(p.offloaded)

    nets = {p.network for p in points}
    if "resnet18" in nets:
        out.append(("ResNet-18, ARM, 100 ns, peak", "21.1x", best("resnet18", "ARM", 100.0)))
    if "yolov5n" in nets:
        out += [
            ("YOLOv5n peak at 50 ns, ARM / x86", "3.1x / 1.9x",
             f"{best('yolov5n', 'ARM', 50.0)} / {best('yolov5n', 'x86', 50.0)}"),
            ("YOLOv5n offloaded, ARM, 1000 ns, C=100", "33", count("ARM", 1000.0, 100)),
            ("YOLOv5n offloaded, x86, 50 ns, C=100", "48 (vs 59 on ARM)", count("x86", 50.0, 100)),
            ("YOLOv5n offloaded, x86, 1000 ns, C=25/50/100/200", "6/6/6/6",
             "/".join(count("x86", 1000.0, c) for c in CROSSBARS)),
        ]  # fmt: skip
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="s per point")
    parser.add_argument("--yolo-time-limit", type=float, default=None,
                        help="s per YOLOv5n point (default: --time-limit)")  # fmt: skip
    parser.add_argument("--networks", default=",".join(NETWORKS))
    parser.add_argument("--json", metavar="FILE", help="write every point as JSON")
    args = parser.parse_args()
    networks = [n.strip() for n in args.networks.split(",") if n.strip()]
    yolo_limit = args.yolo_time_limit if args.yolo_time_limit is not None else args.time_limit
    started = time.perf_counter()
    print(f"solving {len(networks)} networks x {len(HOSTS)} hosts x {len(CROSSBARS)} x"
          f" {len(T_MVM_NS)} points (time limit {args.time_limit:g} s, YOLOv5n {yolo_limit:g} s)"
          " ...", file=sys.stderr)  # fmt: skip
    points = run_grid(networks, args.time_limit, yolo_limit)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([asdict(p) for p in points], fh, indent=1)

    for preset in HOSTS.values():
        hw = load_hardware(preset)
        print(f"{preset}: {hw.describe()}")
    print(f"time limit {args.time_limit:g} s per point (YOLOv5n {yolo_limit:g} s);"
          f" {time.perf_counter() - started:.0f} s in all")
    print()
    print("speed-up over CPU-only (host latencies modelled: estimates), best over the grid:")
    print(f"  {'network':<12}{'host':<6}{'CPU-only':>10}{'C=25':>8}{'C=50':>8}{'C=100':>8}"
          f"{'C=200':>8}   at 50 ns;  at 1000 ns: C=100")
    for net in networks:
        for host in HOSTS:
            row = {c: one(points, network=net, host=host, crossbars=c, t_mvm_ns=50.0)
                   for c in CROSSBARS}  # fmt: skip
            slow = one(points, network=net, host=host, crossbars=100, t_mvm_ns=1000.0)
            cpu = next((p.cpu_only_s for p in row.values() if p and p.cpu_only_s), None)
            cells = "".join(f"{fmt_x(p.speedup if p else None):>8}" for p in row.values())
            print(f"  {net:<12}{host:<6}{(cpu or 0) * 1e3:>8.1f}ms{cells}   "
                  f"{fmt_x(slow.speedup if slow else None)}")
    print()
    print("claims (Section V):")
    claims = []
    if "resnet18" in networks:
        claims += [claim_a(points), claim_b(points), claim_c(points)]
    if "yolov5n" in networks:
        claims.append(claim_d(points))
    for i, (name, paper, ours, verdict) in enumerate(claims):
        print(f"({'abcd'[i] if len(claims) == 4 else i + 1}) {name}")
        print(f"    paper:   {paper}")
        print(f"    ours:    {ours}")
        print(f"    verdict: {verdict}")
    rows = further(points)
    if rows:
        print()
        print("further host-dependent numbers of Section V (paper / ours):")
        for what, paper, ours in rows:
            print(f"  {what:<48}{paper:>20}{ours:>16}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
