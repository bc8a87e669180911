"""How long must a host profile last to reach past the machine's slow spells?

Runs a model with ONNX Runtime as the profiler does (one session, sequential, 1 intra-op
thread, deterministic random inputs), for ``--seconds`` (default 900): every
``--pause`` seconds (default 0.1) a round of 4 runs, keeping the round's fastest run.
Then, for every window length W of ``--windows`` (seconds), it slides a window over the
record and prints how far the fastest round in the window lies above the fastest of the
whole record: median, 90th and 99th percentile, maximum, and the share of windows more
than 5 % above: a proxy for how much too high a profile that spans W seconds at a random
moment reads its total (the profile keeps per operator its fastest run, whose sum is never
above the fastest whole run's kernels; a run's wall time here also holds ONNX Runtime's
per-run overhead, so the proxy is not an exact bound). Also the slow stretches (rounds
12 % or more above the record's fastest) with their lengths, and the load before and after.

    python benchmarks/host_spells.py [MODEL] [--seconds 900] [--pause 0.1]
        [--windows 1,2,4,6,8,10] [--json FILE]

MODEL defaults to the bundled ``examples/resnet_tiny_int8.onnx`` (the quick start's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from placement.onnxfile import read_onnx
from placement.profiling.host import host_description
from placement.profiling.ort.session import (
    create_session,
    random_inputs,
    run_session,
    session_options,
)

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "examples" / "resnet_tiny_int8.onnx"
SLOW = 1.12  # a round this much above the fastest counts as slow


def record(path: Path, seconds: float, pause: float) -> tuple[np.ndarray, np.ndarray]:
    """(start time, fastest of 4 runs) per round, for ``seconds`` after 20 warm-up runs."""
    with tempfile.TemporaryDirectory(prefix="placement-spells-") as tmp:
        session = create_session(read_onnx(path), session_options(1, "all"), path, tmp)
    feeds = random_inputs(session, 0, path)
    for _ in range(20):
        run_session(session, feeds, path)
    stamps, fastest = [], []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        best = float("inf")
        stamps.append(time.perf_counter())
        for _ in range(4):
            tick = time.perf_counter()
            run_session(session, feeds, path)
            best = min(best, time.perf_counter() - tick)
        fastest.append(best)
        time.sleep(pause)
    return np.array(stamps), np.array(fastest)


def window_excess(stamps: np.ndarray, fastest: np.ndarray, window: float) -> np.ndarray:
    """Per window start, the window's fastest round over the record's fastest."""
    ends = np.searchsorted(stamps, stamps + window)
    whole = fastest.min()
    return np.array([fastest[i:j].min() / whole for i, j in enumerate(ends) if j < len(stamps)])


def slow_stretches(stamps: np.ndarray, fastest: np.ndarray) -> list[float]:
    """Lengths (s) of the runs of consecutive slow rounds."""
    slow = fastest > SLOW * fastest.min()
    lengths, first = [], None
    for i, s in enumerate(slow):
        if s and first is None:
            first = i
        elif not s and first is not None:
            lengths.append(float(stamps[i - 1] - stamps[first]))
            first = None
    return lengths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("model", nargs="?", default=str(BUNDLED))
    ap.add_argument("--seconds", type=float, default=900.0)
    ap.add_argument("--pause", type=float, default=0.1)
    ap.add_argument("--windows", default="1,2,4,6,8,10")
    ap.add_argument("--json", help="write the record (stamps, fastest) here")
    args = ap.parse_args()
    windows = [float(w) for w in args.windows.split(",")]
    load_before = os.getloadavg()[0]
    stamps, fastest = record(Path(args.model), args.seconds, args.pause)
    load_after = os.getloadavg()[0]
    if args.json:
        Path(args.json).write_text(json.dumps({"stamps": stamps.tolist(),
                                               "fastest": fastest.tolist()}))  # fmt: skip
    print(f"{len(fastest)} rounds over {stamps[-1] - stamps[0]:.0f} s; fastest round"
          f" {1e3 * fastest.min():.4f} ms, median {1e3 * np.median(fastest):.4f} ms")  # fmt: skip
    print(f"{'window':>7} {'median':>7} {'p90':>7} {'p99':>7} {'max':>7} {'> 5 %':>7}")
    for w in windows:
        r = window_excess(stamps, fastest, w)
        if not len(r):
            continue
        p50, p90, p99 = np.percentile(r, [50, 90, 99])
        print(f"{w:>6g}s {p50:>7.3f} {p90:>7.3f} {p99:>7.3f} {r.max():>7.3f}"
              f" {100 * (r > 1.05).mean():>6.1f}%")  # fmt: skip
    lengths = slow_stretches(stamps, fastest)
    longer = ", ".join(f"> {s} s: {sum(x > s for x in lengths)}" for s in (1, 2, 4, 8))
    print(f"slow stretches (>= {100 * (SLOW - 1):.0f} % above the fastest): {len(lengths)};"
          f" {longer}; longest {max(lengths, default=0.0):.1f} s")  # fmt: skip
    host = host_description()
    print(f"host: {host['cpu']} ({host['machine']}, {os.cpu_count()} CPUs);"
          f" load1 before {load_before:.2f}, after {load_after:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
