"""Calibrate the analytical host model (placement.devices.host) on this machine.

The host model estimates an operator's host latency as a roofline::

    t = overhead + max(MACs / (peak MAC/s x eff_class), bytes / (bandwidth x eff_memory))

Peaks (MAC/s, bandwidth) are the host's published or measured numbers; the efficiencies
and the overhead are what ONNX Runtime makes of them. This script fits them on THIS
machine, which can be measured, to ONNX Runtime profiles of the CIM paper's four int8
networks (resnet18, resnet50, mobilenetv2, yolov5n; ``placement.networks.zoo``), with
this machine's own peaks:

* clock: measured with a dependent chain of integer multiplies (3 cycles each) compiled
  with the system C compiler, the best of 15 runs (a shared VM only ever loses cycles);
  without a compiler, /proc/cpuinfo's "cpu MHz"; ``--clock-ghz`` overrides both;
* MACs per cycle from the CPU flags: AVX-512F = 2 x 512-bit FMA = 32 fp32 MACs/cycle;
  AVX-512 VNNI = 2 x VPDPBUSD zmm = 128 int8 MACs/cycle (AVX2+FMA: 16 and 32);
* memory bandwidth: a single-core copy of 1 GiB arrays with numpy (read + write bytes,
  the STREAM convention), the best of 5.

On a CPU with AMX (this machine: Intel Xeon, Emerald Rapids), ONNX Runtime's int8 GEMM
uses the AMX tiles, which none of the target hosts (Cortex-A72, Zen 2) has. The profiles
are therefore measured with AMX denied (``--allow-amx`` keeps it): each network is
profiled in a child process whose seccomp filter refuses the AMX permission request
(``arch_prctl(ARCH_REQ_XCOMP_PERM)``), so MLAS falls back to its AVX-512 VNNI kernels,
the SIMD dot-product path comparable to NEON on the A72 and AVX2 on Zen 2. The same
child times a large int8 and fp32 GEMM to check the peaks assumed.

The fit: overhead and the four efficiencies (dense conv, depthwise/grouped conv,
matmul/gemm, memory) minimise the mean squared log ratio model/measured over every
operator of the four networks (each operator counts once: small and large alike).
Reported: per class and per operator type, the median and the 10-90 % range of
model/measured; per network, the model's CPU-only total against the measured total,
also with each network held out of the fit; the fitted constants; and the constants
carried to the target hosts -- the same efficiencies (the assumption: ONNX Runtime
reaches the same fraction of peak there as here) and the same overhead in cycles.

    python benchmarks/host_model_calibration.py [--runs auto|N] [--profiles DIR] [--reprofile]
        [--clock-ghz G] [--allow-amx] [--networks resnet18,resnet50,mobilenetv2,yolov5n]

Profiles are kept in ``--profiles`` (default ``$PLACEMENT_CACHE/host-calibration`` or
``~/.cache/placement/host-calibration``) and reused unless ``--reprofile``.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from placement.cim.instance import host_latencies_for
from placement.devices.host import CLASS_LABELS, OP_CLASSES, estimate, graph_work
from placement.graph import load_graph
from placement.hardware.base import HostModelSpec
from placement.networks.zoo import NETWORKS, default_cache_dir, network_path
from placement.profiling.host_profile import HostProfile

# The paper's two hosts: the clock each core runs at under a single-threaded load
# (the presets' host.clock_ghz); the overhead is carried over in cycles.
TARGET_CLOCK_GHZ = {"arm-a72": 1.5, "x86-ryzen": 4.6}
PARAMS = ("overhead_us", "eff_dense_conv", "eff_grouped_conv", "eff_matmul", "eff_memory")
CLOCK_PROBE = r"""
#include <stdio.h>
#include <stdint.h>
#include <time.h>
int main(int argc, char **argv) {
  struct timespec a, b; uint64_t n = 20000000ULL, x = argc, y = argc + 2;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (uint64_t i = 0; i < n; i++) {
    __asm__ volatile("imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\t"
                     "imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\t"
                     "imul %1, %0\n\timul %1, %0" : "+r"(x) : "r"(y));
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
  printf("%.6f\n", 30.0 * n / s / 1e9);  /* 10 imul x 3 cycles latency per iteration */
  return (int)(x & 1);
}
"""


# --------------------------------------------------------------------------- this machine


@dataclass
class Machine:
    cpu: str
    flags: set[str]
    cpuinfo_ghz: float | None
    clock_ghz: float
    clock_source: str
    fp32_macs_per_cycle: float
    int8_macs_per_cycle: float
    peak_note: str
    memory_gbps: float


def cpuinfo() -> tuple[str, set[str], float | None]:
    text = Path("/proc/cpuinfo").read_text(errors="replace")
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    mhz = re.search(r"^cpu MHz\s*:\s*([\d.]+)$", text, re.M)
    return (
        model.group(1).strip() if model else platform.processor(),
        set(flags.group(1).split()) if flags else set(),
        float(mhz.group(1)) / 1e3 if mhz else None,
    )


def measure_clock(runs: int = 15) -> float | None:
    """The core's clock in GHz from a dependent imul chain, or None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None or platform.machine() not in ("x86_64", "AMD64"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        src.write_text(CLOCK_PROBE)
        if subprocess.run([cc, "-O1", str(src), "-o", str(exe)], capture_output=True).returncode:
            return None
        values = [float(subprocess.run([str(exe)], capture_output=True, text=True).stdout)
                  for _ in range(runs)]  # fmt: skip
    return max(values)


def stream_copy_gbps(gib: float = 1.0, repeats: int = 5) -> float:
    """Single-core copy bandwidth over arrays larger than any cache (read + write bytes)."""
    n = int(gib * 2**30)
    src = np.ones(n, dtype=np.uint8)
    dst = np.empty_like(src)
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return 2 * n / best / 1e9


def this_machine(clock_ghz: float | None) -> Machine:
    cpu, flags, cpuinfo_ghz = cpuinfo()
    if clock_ghz is not None:
        clock, source = clock_ghz, "--clock-ghz"
    elif (measured := measure_clock()) is not None:
        clock, source = measured, "measured: dependent imul chain, best of 15 runs"
    elif cpuinfo_ghz is not None:
        clock, source = cpuinfo_ghz, "/proc/cpuinfo cpu MHz"
    else:
        raise SystemExit("cannot tell the clock: give --clock-ghz")
    if "avx512f" in flags:
        fp32, note = 32.0, "AVX-512F: 2 x 512-bit FMA = 32 fp32 MACs/cycle"
    elif "fma" in flags:
        fp32, note = 16.0, "AVX2+FMA: 2 x 256-bit FMA = 16 fp32 MACs/cycle"
    else:
        fp32, note = 4.0, "SSE: 4 fp32 MACs/cycle (assumption)"
    if "avx512_vnni" in flags:
        int8 = 128.0
        note += "; AVX-512 VNNI: 2 x VPDPBUSD zmm = 128 int8 MACs/cycle"
    elif "avx_vnni" in flags:
        int8 = 64.0
        note += "; AVX-VNNI: 2 x VPDPBUSD ymm = 64 int8 MACs/cycle"
    else:
        int8 = 2 * fp32
        note += f"; no VNNI: {2 * fp32:g} int8 MACs/cycle (assumption)"
    return Machine(cpu, flags, cpuinfo_ghz, clock, source, fp32, int8, note, stream_copy_gbps())


# --------------------------------------------------------------------------- profiling


def deny_amx() -> None:
    """Make the AMX permission request fail in this process (seccomp, before ORT loads)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def ins(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k)

    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET|K
    nr_arch_prctl, arch_req_xcomp_perm = 158, 0x1023
    program = b"".join([
        ins(ld, 0, 0, 0), ins(jeq, 0, 3, nr_arch_prctl),  # seccomp_data.nr
        ins(ld, 0, 0, 16), ins(jeq, 0, 1, arch_req_xcomp_perm),  # args[0], low word
        ins(ret, 0, 0, 0x00050000 | 1),  # SECCOMP_RET_ERRNO | EPERM
        ins(ret, 0, 0, 0x7FFF0000),  # SECCOMP_RET_ALLOW
    ])  # fmt: skip
    buffer = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


PROBE_KEEP = {  # probe model -> the operators that enter the fit
    "probe_depthwise_k3": ("dw1", "dw2"),
    "probe_depthwise_k5": ("dw1", "dw2"),
    "probe_depthwise_k7": ("dw1", "dw2"),
    "probe_gemm": ("gemm_512x2048x512", "gemm_196x768x768"),
}


def probe_model(name: str) -> bytes:
    """The synthetic operators the networks cannot calibrate.

    ``probe_depthwise_kK``: four chained int8 depthwise convolutions (144 channels, 56 x 56,
    K x K kernel, same padding). The four networks cannot tell whether ONNX Runtime's
    depthwise kernel is compute- or memory-bound (their 3 x 3 depthwise convolutions all
    have about the same MACs per byte); K = 3, 5, 7 moves the MACs and not the bytes.
    Only the middle two enter the fit: the first and last carry the layout transposes at
    the model's edges. ``probe_gemm``: two int8 MatMulInteger GEMMs, compute-bound -- the
    networks' only MatMul/Gemm are batch-1 classifiers (GEMV, memory-bound).
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def const(value: np.ndarray, tensor: str) -> str:
        inits.append(numpy_helper.from_array(value, tensor))
        return tensor

    if name == "probe_gemm":
        inputs, outputs = [], []
        for m, k, n in ((512, 2048, 512), (196, 768, 768)):
            tag = f"{m}x{k}x{n}"
            inputs.append(helper.make_tensor_value_info(f"a_{tag}", TensorProto.UINT8, [m, k]))
            outputs.append(helper.make_tensor_value_info(f"y_{tag}", TensorProto.INT32, [m, n]))
            weight = const(rng.integers(-127, 127, (k, n), dtype=np.int8), f"b_{tag}")
            nodes.append(helper.make_node("MatMulInteger", [f"a_{tag}", weight], [f"y_{tag}"],
                                          name=f"gemm_{tag}"))  # fmt: skip
    else:
        k, c, hw = int(name[-1]), 144, 56
        inputs = [helper.make_tensor_value_info("x0", TensorProto.UINT8, [1, c, hw, hw])]
        scale = const(np.array(0.02, dtype=np.float32), "scale")
        zero = const(np.array(128, dtype=np.uint8), "zero")
        w_zero = const(np.array(0, dtype=np.int8), "w_zero")
        for i in range(4):
            weight = const(rng.integers(-127, 127, (c, 1, k, k), dtype=np.int8), f"w{i}")
            bias = const(rng.integers(-1000, 1000, (c,), dtype=np.int32), f"b{i}")
            nodes.append(helper.make_node(
                "QLinearConv", [f"x{i}", scale, zero, weight, scale, w_zero, scale, zero, bias],
                [f"x{i + 1}"], name=f"dw{i}", group=c, kernel_shape=[k, k], pads=[k // 2] * 4,
            ))  # fmt: skip
        outputs = [helper.make_tensor_value_info("x4", TensorProto.UINT8, [1, c, hw, hw])]
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    return model.SerializeToString()


def worker(argv: list[str]) -> None:
    """Child process: ``profile NETWORK|PROBE.onnx OUT RUNS allow|deny``."""
    _, target, out, runs, amx = argv
    if amx == "deny":
        deny_amx()
    from placement.profiling.ort.measure import profile_model

    path = Path(target) if target.endswith(".onnx") else network_path(target, int8=True)
    profile = profile_model(path, runs=runs if runs == "auto" else int(runs), warmup=5)
    profile.metadata["amx"] = "denied" if amx == "deny" else "allowed"
    profile.save(out)


def child(*args: str) -> str:
    proc = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True,
                          text=True)  # fmt: skip
    if proc.returncode:
        raise SystemExit(f"worker {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return proc.stdout


# --------------------------------------------------------------------------- data and fit


@dataclass
class Op:
    repeat: int
    network: str
    name: str
    op_type: str
    op_class: str
    precision: str
    macs: float
    nbytes: int
    measured: float


def load_ops(models: dict[str, Path], profiles: dict[str, HostProfile], repeat: int) -> list[Op]:
    """Every operator of the networks, and the kept operators of the probes."""
    ops = []
    for net, path in models.items():
        graph = load_graph(path)
        profiles[net].check_matches(graph.sha256, graph.path)
        measured = host_latencies_for(graph, profiles[net].latencies)
        keep = PROBE_KEEP.get(net)
        for name, work in graph_work(graph).items():
            if keep is None or name in keep:
                label = f"{net}/{name}" if keep else name
                ops.append(Op(repeat, "probes" if keep else net, label,
                              graph.operators[name].op_type,
                              work.op_class, work.precision, work.macs, work.nbytes,
                              measured[name]))  # fmt: skip
    return ops


def spec_from(x: np.ndarray, machine: Machine) -> HostModelSpec:
    """Parameters (log overhead, logit of each efficiency) -> the host model's constants."""
    eff = 1.0 / (1.0 + np.exp(-x[1:]))
    return HostModelSpec(
        clock=machine.clock_ghz * 1e9,
        fp32_macs_per_cycle=machine.fp32_macs_per_cycle,
        int8_macs_per_cycle=machine.int8_macs_per_cycle,
        memory_bandwidth=machine.memory_gbps * 1e9,
        overhead=float(np.exp(x[0])),
        eff_dense_conv=float(eff[0]),
        eff_grouped_conv=float(eff[1]),
        eff_matmul=float(eff[2]),
        eff_memory=float(eff[3]),
    )


class Vectorised:
    """The roofline over all operators at once, for the optimiser (same formula as
    ``placement.devices.host.estimate``, which the reported numbers use)."""

    def __init__(self, ops: list[Op], machine: Machine) -> None:
        self.macs = np.array([o.macs for o in ops])
        self.nbytes = np.array([o.nbytes for o in ops], dtype=float)
        self.peak = np.array([
            machine.clock_ghz * 1e9 * (machine.int8_macs_per_cycle if o.precision == "int8"
                                       else machine.fp32_macs_per_cycle) for o in ops
        ])  # fmt: skip
        self.cls = np.array([min(OP_CLASSES.index(o.op_class), 2) for o in ops])
        self.compute_op = np.array([o.op_class != "memory" for o in ops])
        self.bandwidth = machine.memory_gbps * 1e9
        self.log_measured = np.log(np.array([o.measured for o in ops]))

    def loss(self, x: np.ndarray) -> float:
        eff = 1.0 / (1.0 + np.exp(-x[1:]))
        compute = np.where(self.compute_op, self.macs / (self.peak * eff[self.cls]), 0.0)
        memory = self.nbytes / (self.bandwidth * eff[3])
        model = np.exp(x[0]) + np.maximum(compute, memory)
        return float(np.mean((np.log(model) - self.log_measured) ** 2))


def nelder_mead(f, x0: np.ndarray, step: float = 1.0, iters: int = 4000) -> np.ndarray:
    """Plain Nelder-Mead (no SciPy in the environment); enough for five parameters."""
    n = len(x0)
    simplex = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if abs(values[-1] - values[0]) < 1e-12 * (1 + abs(values[0])):
            break
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best + 0.5 * (x - best) for x in simplex]
                values = [f(x) for x in simplex]
    return simplex[int(np.argmin(values))]


def fit(ops: list[Op], machine: Machine) -> HostModelSpec:
    vec = Vectorised([o for o in ops if o.measured > 0], machine)
    best = None
    for start_overhead_us in (2.0, 10.0, 30.0):  # a few starts: the max() makes it bumpy
        x0 = np.array([math.log(start_overhead_us * 1e-6), 0.0, -1.0, -1.0, -1.0])
        x = nelder_mead(vec.loss, x0)
        x = nelder_mead(vec.loss, x, step=0.2)
        if best is None or vec.loss(x) < vec.loss(best):
            best = x
    return spec_from(best, machine)


# --------------------------------------------------------------------------- reports


def ratios(ops: list[Op], spec: HostModelSpec) -> list[float]:
    return [estimate_op(o, spec) / o.measured for o in ops if o.measured > 0]


def estimate_op(op: Op, spec: HostModelSpec) -> float:
    from placement.devices.host import OperatorWork

    return estimate(OperatorWork(op.op_class, op.precision, op.macs, op.nbytes), spec).total


def spread(values: list[float]) -> tuple[float, float, float]:
    """Median and the 10th and 90th percentiles."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=10, method="inclusive")
    return statistics.median(values), q[0], q[-1]


def class_table(ops: list[Op], spec: HostModelSpec, key: str) -> list[str]:
    groups: dict[str, list[Op]] = {}
    for o in ops:
        groups.setdefault(getattr(o, key), []).append(o)
    total = math.fsum(o.measured for o in ops)
    order = OP_CLASSES if key == "op_class" else sorted(
        groups, key=lambda g: -math.fsum(o.measured for o in groups[g]))
    head = f"{'class' if key == 'op_class' else 'op type':<26}{'ops':>5}{'time share':>12}"
    lines = [head + f"{'median model/meas.':>20}{'10-90 % range':>18}"]
    for g in order:
        mine = groups.get(g, [])
        r = ratios(mine, spec)
        if not r:
            continue
        med, lo, hi = spread(r)
        share = math.fsum(o.measured for o in mine) / total
        label = CLASS_LABELS.get(g, g)
        lines.append(f"{label:<26}{len(mine):>5}{share:>11.1%}{med:>20.2f}"
                     f"{f'{lo:.2f} - {hi:.2f}':>18}")  # fmt: skip
    return lines


def network_table(ops: list[Op], spec: HostModelSpec, machine: Machine,
                  networks: list[str], repeats: int) -> list[str]:  # fmt: skip
    """Per network, the CPU-only total (the mean over the repeats) measured and modelled,
    and modelled with constants fitted without that network."""
    lines = [f"{'network':<14}{'ops':>5}{'measured':>12}{'range':>18}{'model':>12}"
             f"{'model/meas.':>13}{'held out':>12}{'held-out/meas.':>16}"]  # fmt: skip
    for net in networks:
        mine = [o for o in ops if o.network == net]
        totals = [math.fsum(o.measured for o in mine if o.repeat == r) for r in range(repeats)]
        measured = math.fsum(totals) / repeats
        model = math.fsum(estimate_op(o, spec) for o in mine) / repeats
        held = fit([o for o in ops if o.network != net], machine) if len(networks) > 1 else spec
        held_total = math.fsum(estimate_op(o, held) for o in mine) / repeats
        span = f"{min(totals) * 1e3:.2f}-{max(totals) * 1e3:.2f}ms"
        lines.append(f"{net:<14}{len(mine) // repeats:>5}{measured * 1e3:>10.2f}ms{span:>18}"
                     f"{model * 1e3:>10.2f}ms{model / measured:>13.2f}"
                     f"{held_total * 1e3:>10.2f}ms{held_total / measured:>16.2f}")  # fmt: skip
    return lines


def constants(spec: HostModelSpec) -> dict[str, float]:
    return {k: v for k, v in spec.to_file_units().items() if k in PARAMS}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="auto",
                        help="measured runs per profile, or 'auto' (default): rounds until the"
                        " total is stable to 2 %% or 30 s are spent (placement profile --runs)")
    parser.add_argument("--profiles", type=Path, default=None, help="profile directory")
    parser.add_argument("--reprofile", action="store_true", help="measure even if saved")
    parser.add_argument("--clock-ghz", type=float, default=None, help="assume this clock")
    parser.add_argument("--allow-amx", action="store_true", help="let ORT use AMX tiles")
    parser.add_argument("--repeats", type=int, default=3,
                        help="profile every model this many times (default 3): the fit uses"
                        " them all, and each alone shows how much the constants move")
    parser.add_argument("--networks", default=",".join(NETWORKS))
    args = parser.parse_args()
    networks = [n.strip() for n in args.networks.split(",") if n.strip()]
    unknown = [n for n in networks if n not in NETWORKS]
    if unknown:
        parser.error(f"unknown network {unknown[0]!r}; known: {', '.join(NETWORKS)}")
    amx = "allow" if args.allow_amx else "deny"
    folder = args.profiles or default_cache_dir().parent / "host-calibration"
    folder.mkdir(parents=True, exist_ok=True)

    machine = this_machine(args.clock_ghz)
    models = {net: network_path(net, int8=True) for net in networks}
    for probe in PROBE_KEEP:
        models[probe] = folder / f"{probe}.onnx"
        if not models[probe].exists() or args.reprofile:
            models[probe].write_bytes(probe_model(probe))
    repeats: list[dict[str, HostProfile]] = []
    for r in range(args.repeats):
        profiles = {}
        for name, model in models.items():  # interleaved: slow drifts hit every model
            path = folder / f"{name}.{amx}-amx.r{r}.profile.json"
            if args.reprofile or not path.exists():
                print(f"profiling {name} ({args.runs} runs, AMX {amx}, repeat {r + 1}) ...",
                      file=sys.stderr)  # fmt: skip
                source = str(model) if name in PROBE_KEEP else name
                child("profile", source, str(path), str(args.runs), amx)
            profiles[name] = HostProfile.load(path)
        repeats.append(profiles)
    per_repeat = [load_ops(models, profiles, r) for r, profiles in enumerate(repeats)]
    ops = [o for group in per_repeat for o in group]
    spec = fit(ops, machine)
    alone = [fit(group, machine) for group in per_repeat]

    print(f"host model calibration, {date.today().isoformat()}")
    print(f"machine: {machine.cpu}, {platform.machine()}, {os.cpu_count()} CPUs")
    avx = sorted(f for f in machine.flags if f.startswith(("avx512_vnni", "avx_vnni", "amx")))
    amx_text = "allowed" if amx == "allow" else "denied (seccomp), VNNI kernels"
    print(f"  flags: {', '.join(avx) or '-'}; ONNX Runtime's AMX: {amx_text}")
    print(f"  clock: {machine.clock_ghz:.2f} GHz ({machine.clock_source}); /proc/cpuinfo"
          f" says {machine.cpuinfo_ghz} GHz")  # fmt: skip
    print(f"  peaks: {machine.peak_note}")
    int8_peak = machine.clock_ghz * machine.int8_macs_per_cycle
    fp32_peak = machine.clock_ghz * machine.fp32_macs_per_cycle
    print(f"    = {int8_peak:.0f} int8 GMAC/s, {fp32_peak:.0f} fp32 GMAC/s")
    for o in ops:
        if o.network == "probes" and o.op_class == "matmul":
            rate = o.macs / o.measured / 1e9
            print(f"    {o.repeat + 1}: ONNX Runtime {o.name}: {rate:.0f} GMAC/s"
                  f" ({rate / int8_peak:.0%} of the int8 peak)")
    print(f"  memory: {machine.memory_gbps:.1f} GB/s single-core copy of 1 GiB arrays"
          " (read + write, best of 5)")  # fmt: skip
    print("  profiles (ONNX Runtime, 1 thread, per operator the median of round minima):")
    for r, name, profile in ((r, n, p) for r, ps in enumerate(repeats) for n, p in ps.items()):
        meta = profile.metadata
        spread = meta.get("total_spread")
        load = (meta.get("machine_load") or {}).get("busy_others_per_cpu")
        print(f"    {r + 1}: {name:<20} {profile.kernel_total * 1e3:8.2f} ms,"
              f" {meta.get('runs')} runs in {meta.get('rounds')} rounds, total spread"
              f" {'-' if spread is None else f'{spread:.1%}'}, others kept"
              f" {'-' if load is None else f'{load:.0%}'} of the CPUs busy"
              + (" (warned: not reproducible)" if profile.warnings else ""))  # fmt: skip
    print()
    n_probes = sum(1 for o in per_repeat[0] if o.network == "probes")
    n_ops = len(per_repeat[0])
    print(f"fitted on {n_ops} operators ({n_ops - n_probes} of {', '.join(networks)} and"
          f" {n_probes} probes) x {args.repeats} profiles each (in {folder}):")
    print(f"  {'constant':<18}{'all profiles':>14}{'each repeat alone':>24}")
    for key, value in constants(spec).items():
        each = [constants(a)[key] for a in alone]
        print(f"  {key:<18}{value:>14.4g}{', '.join(f'{v:.3g}' for v in each):>24}")
    print()
    print("fit quality per class (model / measured, per operator):")
    print("\n".join("  " + line for line in class_table(ops, spec, "op_class")))
    print()
    print("per operator type:")
    print("\n".join("  " + line for line in class_table(ops, spec, "op_type")))
    print()
    print("CPU-only total per network (held out: fitted on the other networks):")
    print("\n".join("  " + line for line in network_table(ops, spec, machine, networks,
                                                           args.repeats)))
    print()
    print("depthwise probes (144 channels, 56 x 56): measured and modelled per kernel size:")
    for o in ops:
        if o.network == "probes" and o.op_class == "grouped_conv" and o.name.endswith("dw1"):
            print(f"  {o.repeat + 1}: {o.name}: {o.macs / 1e6:.1f} MMAC, {o.nbytes / 1e3:.0f} kB:"
                  f" measured {o.measured * 1e6:.0f} us, model {estimate_op(o, spec) * 1e6:.0f} us")
    print()
    print("[host] constants carried to the target hosts (same efficiencies; overhead in cycles):")
    for target, clock in TARGET_CLOCK_GHZ.items():
        overhead = spec.overhead * machine.clock_ghz * 1e9 / (clock * 1e9) * 1e6
        values = constants(spec) | {"overhead_us": overhead}
        print(f"  {target} (clock {clock:g} GHz):")
        for key, value in values.items():
            print(f"    {key} = {value:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
