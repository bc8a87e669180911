"""Torch-PIM's results (Section 5.2, Tables 4 and 5) beside this project's, with a verdict each.

For every verdict and figure of the paper's Section 5.2 (Fig. 3), its Table 4 (offloaded
nests per operator as N varies), its Table 5 (granularity costs) and the decoder-layer
verdicts (GPT-J-6B, LLaMA-7B), this script prints one row: the claim, the paper's value,
the project's value per host-time source, and a verdict per source:

* ``holds``: the claim and its number (within the tolerance the row states);
* ``shape only``: the claim's trend or class holds, its number does not;
* ``differs``: the claim does not hold here; the row says why.

What runs (``placement.pim`` API, exactly what ``placement profile/solve --target pim``
does): each workload of ``placement.networks.workloads`` is built, lowered with
torch-mlir and profiled with simulated counters (``counters="simulated"``: a callgrind
cache simulation of the timed program; this VM's PMU does not count the Table 1 events)
and the host times of a source (``host_times``):

* ``compiled``: the MLIR JIT of the host-optimized nests (every verdict is judged on
  this source first: it is the one the issue asks the verdicts to hold with);
* ``ort``: ONNX Runtime's per-operator times (1 thread) split over each operator's nests
  by their compiled shares -- derived from the same profile (``apportion_ort`` on the
  compiled times and ONNX Runtime's operator times it records), counters unchanged;
* ``jit``: the loops as lowered, unoptimized (the paper's own method), with counters
  simulated on that program.

Then the threshold rule (C1-C4) and the Eq.-9-optimal model on the ``pim-icelake``
preset (the paper's Table 2 system; its T_pim is this project's analytical model, not
the paper's Sniper simulation) at the paper's 32, 64 and 128 cores, Eq. 8's copy upper
bound (the paper's). Speed-ups are over the CPU-only time of the same source (the
baseline is named in every speed-up row). Table 4's and Table 5's core count is not
stated in the paper; both are evaluated at 32 cores (the preset's), stated per row.

Sizes (``FIG_SIZES``, ``TABLE4_SIZES`` in ``pim_verdict_jobs.py``): the paper's where it
gives one and a run takes under a minute here; else the largest that does (stated in the
output).
Decoder layers are one batch-1 decode step with 128 cached tokens at the full 7B/6B
widths (see :data:`DECODER_PAST`).

Profiles are cached under ``benchmarks/out/pim_verdicts/`` (gitignored), one JSON per
workload, size and source, each made in its own process; a re-run only evaluates
(``--refresh`` re-profiles). The first full run makes 100 profiles (50 workload sizes x
compiled and jit): about 45 minutes on this 2-core VM at load 0.2-1.9, 23 of them for
the callgrind simulation of the compiled 2048^3 matmul, and three hours at load 4-7.
Profile on a quiet machine: the load slows every measured T_cpu, and so lowers every
simulated bandwidth (traffic / T_cpu); the output's header gives the load the cached
profiles were measured at. ``--quick`` profiles and evaluates only the claims the issue
requires (the verdict classes of item 5).

    python benchmarks/pim_paper_verdicts.py                 # all claims (profiles cached)
    python benchmarks/pim_paper_verdicts.py --quick         # the required verdict classes
    python benchmarks/pim_paper_verdicts.py --profile-only  # fill the cache, print nothing
    python benchmarks/pim_paper_verdicts.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pim_verdict_jobs import BIG_RUNS, BIG_WARMUP, OUT, RUNS, TABLE5, WARMUP, Job, jobs

# --------------------------------------------------------------------------- child: one profile


def profile_child(workload: str, n: int, source: str) -> None:
    """Build, lower and profile one workload (this process); write the cached files."""
    from placement.networks.workloads import build
    from placement.profiling.mlir.loops import nest_loops
    from placement.profiling.nest_measure import lower_model, profile_nests

    job = Job(workload, n, source)
    job.profile_path.parent.mkdir(parents=True, exist_ok=True)
    model = OUT / "models" / f"{workload}_{n}.onnx"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_bytes(build(workload, n).SerializeToString())
    try:
        program = lower_model(model)
        runs, warmup = (BIG_RUNS, BIG_WARMUP) if job.big else (RUNS, WARMUP)
        profile = profile_nests(model, runs=runs, warmup=warmup, counters="simulated",
                                host_times=source, program=program)  # fmt: skip
        profile.save(job.profile_path)
        if workload in TABLE5 and source == "compiled":
            loops = {k: v.to_json() for k, v in nest_loops(program).items()}
            job.loops_path.write_text(json.dumps(loops))
    finally:
        model.unlink(missing_ok=True)  # up to 1 GiB; the profile keeps its SHA-256


def run_jobs(todo: list[Job], refresh: bool, timeout: float) -> list[str]:
    """Profile every job not cached yet, each in its own process; the failures."""
    failures = []
    for i, job in enumerate(todo, 1):
        if job.profile_path.exists() and not refresh:
            continue
        print(f"[{i}/{len(todo)}] profiling {job.stem} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        cmd = [sys.executable, __file__, "--child", job.workload, str(job.n), job.source]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            failures.append(f"{job.stem}: timeout after {timeout:.0f} s")
            continue
        if proc.returncode != 0 or not job.profile_path.exists():
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:])
            failures.append(f"{job.stem}: {tail}")
            continue
        print(f"    done in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return failures


# --------------------------------------------------------------------------- parent


def profile_loads(todo: list[Job]) -> str:
    """The load average the cached profiles were measured at (ONNX Runtime's profile
    records it) and their dates: T_cpu, and every bandwidth over it, moves with the load."""
    loads, dates = [], []
    for job in todo:
        if not job.profile_path.exists():
            continue
        meta = json.loads(job.profile_path.read_text()).get("metadata") or {}
        load = ((meta.get("onnxruntime") or {}).get("machine_load") or {}).get("loadavg_before")
        if load is not None:
            loads.append(load)
        if meta.get("date"):
            dates.append(meta["date"][:16])
    if not loads:
        return "load not recorded"
    return (f"{len(loads)} measured at load average {min(loads):.1f}-{max(loads):.1f}"
            f" (1 minute, {os.cpu_count()} CPUs), {min(dates)} to {max(dates)}")


def machine_load() -> str:
    try:
        text = Path("/proc/loadavg").read_text().split()
    except OSError:
        return "load unknown"
    return f"/proc/loadavg {' '.join(text[:3])} on {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        profile_child(argv[1], int(argv[2]), argv[3])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="only the required verdict classes")
    p.add_argument("--refresh", action="store_true", help="re-profile cached workloads")
    p.add_argument("--profile-only", action="store_true", help="fill the cache and stop")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per profile")
    p.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = p.parse_args(argv)
    todo = jobs(args.quick)
    print(f"# {' '.join([Path(sys.argv[0]).name, *argv])}")
    print(f"# before: {machine_load()}")
    failures = run_jobs(todo, args.refresh, args.timeout)
    for f in failures:
        print(f"# profile FAILED: {f}")
    if args.profile_only:
        print(f"# after: {machine_load()}")
        return 1 if failures else 0
    from pim_verdict_tables import evaluate_all, print_rows

    rows = evaluate_all(args.quick)
    print(f"# profiles: {profile_loads(todo)}")
    print_rows(rows)
    print(f"# after: {machine_load()}")
    if args.json:
        args.json.write_text(json.dumps([r.to_json() for r in rows], indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
