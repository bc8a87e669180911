"""`placement calibrate --target pim` on the paper's workloads as this project has them.

Torch-PIM calibrates theta on "the 44 profiled loops" of its tensor-operator and layer
benchmarks (Section 4.4; Table 3). This script builds the same workloads
(``placement.networks.workloads``: the elementwise, transcendental, reduction and
GEMM/conv operators and the MLP and attention layers, at the sizes in :data:`SIZES`,
small enough for a 2-core VM), profiles each once per host-time source with simulated
counters (a callgrind cache simulation: this VM has no PMU), caches the profiles under
``benchmarks/out/pim_calibrate/``, and runs the command on them, printing the command,
the machine's load and its report::

    python benchmarks/pim_calibrate.py --host-times jit          # the paper's configuration
    python benchmarks/pim_calibrate.py --host-times ort          # the project's default
    python benchmarks/pim_calibrate.py --host-times jit -- --copy upper_bound
    python benchmarks/pim_calibrate.py --refresh ...             # profile again

Arguments after ``--`` go to ``placement calibrate`` unchanged.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "pim_calibrate"
# workload -> size (placement.networks.workloads): the paper's operators and layers (Table 3),
# without the 7B/6B decoder layers (profiling them alone takes longer than all of these).
SIZES = {
    **{name: 1 << 20 for name in ("ew_add", "copy", "scale", "zeroing", "relu",
                                  "silu", "gelu", "tanh")},
    "softmax": 4096, "layernorm": 4096, "rmsnorm": 4096,  # 64 rows
    "mac": 1024, "gemv": 4096, "matmul": 256, "depthwise_conv": 64,
    "mlp": 1024, "attention": 768,
}  # fmt: skip
RUNS, WARMUP = 7, 2


def placement(*args: object) -> list[str]:
    return [sys.executable, "-m", "placement.cli", *map(str, args)]


def model_path(name: str, n: int) -> Path:
    return OUT / "models" / f"{name}_{n}.onnx"


def profile_path(name: str, n: int, source: str) -> Path:
    return OUT / "profiles" / f"{name}_{n}_{source}.nests.json"


def prepare(source: str, refresh: bool) -> list[tuple[Path, Path]]:
    """Every workload's model and its profile for ``source`` (made where missing)."""
    from placement.networks.workloads import build

    pairs = []
    for i, (name, n) in enumerate(SIZES.items(), 1):
        model, profile = model_path(name, n), profile_path(name, n, source)
        model.parent.mkdir(parents=True, exist_ok=True)
        profile.parent.mkdir(parents=True, exist_ok=True)
        if not model.exists():
            model.write_bytes(build(name, n).SerializeToString())
        if refresh or not profile.exists():
            print(f"[{i}/{len(SIZES)}] profiling {name} {n} ({source}) ...", file=sys.stderr,
                  flush=True)  # fmt: skip
            start = time.perf_counter()
            subprocess.run(
                placement("profile", model, "--target", "pim", "-o", profile, "--host-times",
                          source, "--counters-source", "simulated", "--runs", RUNS,
                          "--warmup", WARMUP, "-q"),
                check=True,
            )  # fmt: skip
            print(f"    {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        pairs.append((model, profile))
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host-times", choices=("jit", "compiled", "ort"), default="jit")
    parser.add_argument("--refresh", action="store_true", help="profile every workload again")
    parser.add_argument("extra", nargs="*", help="after --: more `placement calibrate` options")
    args = parser.parse_args()
    pairs = prepare(args.host_times, args.refresh)
    tag = "_".join([args.host_times, *(a.lstrip("-").replace("=", "-") for a in args.extra)])
    command = ["placement", "calibrate", "--target", "pim"]
    command += [str(m.relative_to(OUT)) for m, _ in pairs]
    for _, p in pairs:
        command += ["--profile", str(p.relative_to(OUT))]
    command += ["-o", f"hw_{tag}.toml", "--json", f"calibration_{tag}.json", *args.extra]
    load = os.getloadavg()
    print(f"$ cd {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}")
    print("$ " + shlex.join(command))
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 CPUs)", flush=True)
    result = subprocess.run([*placement(*command[1:])], cwd=OUT)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
