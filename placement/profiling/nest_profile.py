"""Per-nest host profiles of the PIM path and their JSON file format.

A nest profile holds the loop nests a lowering materialized (as
:class:`~placement.nests.LoopNest` JSON), the host time ``T_cpu`` of each (seconds,
all invocations, from :func:`~placement.profiling.nest_timing.time_nests`) and the
Table 1 counters of each nest, or none with the reason. Like
:class:`~placement.profiling.host_profile.HostProfile` it is tied to the exact model
file by SHA-256 and written atomically.

File format (JSON object, written with indentation)::

    {
      "format": "placement-nest-profile",
      "version": 1,
      "model_path": "model.onnx",
      "model_sha256": "<64 hex digits>",
      "source_kind": "onnx",             # or "mlir"
      "nests": [<LoopNest JSON>, ...],   # program order
      "t_cpu": {"n000": 1.2e-05, ...},
      "counters": {"n000": {"offcore_requests.all_data_rd": 123, ...}, ...} | null,
      "counter_source": "measured" | "file" | "simulated" | "unavailable: <reason>",
      "host_times": "ort" | "compiled" | "jit",   # where t_cpu comes from (below)
      "cache": "warm" | "cold",                   # cache state of the measurement
      "ort_cpu_only": 1.2e-03 | null,             # ONNX Runtime's CPU-only time, seconds
      "host_dram_read": {"gbps": 8.3, "method": ..., ...} | null,   # B_cpu (below)
      "metadata": {"torch_mlir_version": ..., "runs": ..., "date": ..., "machine": ...,
                   "marker_pair_ns": ..., ..., "simulation": {...},
                   "host_times_detail": {...}, "onnxruntime": {...}}
    }

Host-time sources (``host_times``, one of :data:`HOST_TIME_SOURCES`):

``jit``
    the MLIR JIT of the loops exactly as lowered (no host optimization): the original
    method, kept to compare with the paper's; 30-500x slower than ONNX Runtime.
``compiled``
    the MLIR JIT of the program optimized for the host
    (:mod:`placement.profiling.mlir.optimize`).
``ort``
    per ONNX operator, ONNX Runtime's time (1 thread, the CIM path's profiler) split over
    the operator's nests in proportion to their compiled times; nests with no ONNX
    operator keep their compiled time (:func:`placement.profiling.ort.apportion.apportion_ort`).

``ort_cpu_only`` is ONNX Runtime's CPU-only time for the same model (the sum of its
per-operator times), measured when profiling so that every result can state its
baseline next to what a user runs today; ``null`` for ``.mlir`` input (nothing for ONNX
Runtime to run). Files written before these three keys existed load as ``jit``,
``warm`` and ``null``: that is what they held.

``host_dram_read`` is this host's single-thread DRAM read bandwidth ``B_cpu``, measured
when profiling (:mod:`placement.profiling.dram_bandwidth`: ``gbps``, the method, the
spread of the passes); rule C3's threshold is ``theta_ratio x`` this figure. Files
written before the key existed (and profiles that did not measure it) hold ``null``:
the rule then uses the hardware's ``host_dram_gbps``.

``counters`` hold the five Table 1 events per nest (``measured``: perf events on this
host; ``file``: loaded with ``--counters``), or, with ``counter_source`` ``simulated``,
the :data:`~placement.profiling.counters.SIMULATED_EVENTS` of a callgrind cache
simulation (:mod:`placement.profiling.simulated`). A simulated profile's
``metadata["simulation"]`` records how: the cache geometry (I1, D1, LL with its level
and where it came from), the valgrind and gcc versions, the warm-up runs, the target
features, the invocations per nest and the simulation's wall time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.io import (
    check_header,
    check_model_fields,
    check_model_match,
    is_nonnegative_number,
    read_json_file,
    write_json_atomic,
)
from placement.nests import LoopNest
from placement.profiling.counters import SIMULATED_EVENTS, TABLE1_EVENTS, event_key

FORMAT_NAME = "placement-nest-profile"
FORMAT_VERSION = 1
MEASURED, FILE, SIMULATED, UNAVAILABLE = "measured", "file", "simulated", "unavailable"
HOST_TIME_SOURCES = ("ort", "compiled", "jit")
CACHE_STATES = ("warm", "cold")
#: What a profile without the ``host_times`` key holds (written before the key existed).
LEGACY_HOST_TIMES = "jit"
HOST_TIME_DESCRIPTIONS = {
    "ort": "ONNX Runtime per-operator times (1 thread) split over each operator's nests by"
    " their compiled-JIT shares",
    "compiled": "MLIR JIT of the host-optimized loop nests",
    "jit": "MLIR JIT of the loop nests as lowered, unoptimized (the paper's method)",
}
HOST_FORMAT_NAME = "placement-host-profile"  # the CIM format, named when given by mistake


@dataclass
class NestProfile:
    """Loop nests of one model with their host times and (optionally) counters."""

    nests: list[LoopNest]
    t_cpu: dict[str, float]
    counters: dict[str, dict[str, float]] | None
    counter_source: str  # "measured" | "file" | "simulated" | "unavailable: <reason>"
    model_sha256: str
    model_path: str
    source_kind: str  # "onnx" | "mlir"
    metadata: dict[str, Any]
    # Where the profile was loaded from (not stored in the file): lets messages name it.
    source: str | None = field(default=None, compare=False, repr=False)
    host_times: str = LEGACY_HOST_TIMES  # "ort" | "compiled" | "jit" (module docstring)
    cache: str = "warm"  # "warm" | "cold"
    ort_cpu_only: float | None = None  # ONNX Runtime's CPU-only seconds for the model
    host_dram_read: dict[str, Any] | None = None  # B_cpu measured here (module docstring)

    @property
    def host_times_description(self) -> str:
        return HOST_TIME_DESCRIPTIONS.get(self.host_times, self.host_times)

    @property
    def host_dram_bandwidth(self) -> float | None:
        """``B_cpu`` measured on the profiling host, B/s; None when not measured."""
        return None if self.host_dram_read is None else self.host_dram_read["gbps"] * 1e9

    @property
    def nest_ids(self) -> list[str]:
        return [n.id for n in self.nests]

    @property
    def counters_unavailable_reason(self) -> str | None:
        prefix = f"{UNAVAILABLE}: "
        if self.counter_source.startswith(prefix):
            return self.counter_source[len(prefix) :]
        return None

    @property
    def simulated(self) -> bool:
        """The counters come from a cache simulation, not from hardware events."""
        return self.counter_source == SIMULATED

    @property
    def cpu_only(self) -> float:
        return math.fsum(self.t_cpu.values())

    @property
    def counter_seconds(self) -> dict[str, float]:
        """Per nest, the time of the program its counters were counted on: rule C3's
        denominator (Eq. 6 divides a region's traffic by its own elapsed time).

        With ``ort`` host times the profile's counters come from the compiled program, not
        from ONNX Runtime, so this is the compiled program's JIT time
        (``host_times_detail.jit_seconds``); dividing its traffic by ONNX Runtime's time
        would give a bandwidth no program achieved. Otherwise, and for counters loaded
        from a file (``FILE``: what was counted is unknown), it is ``t_cpu``.
        """
        if self.host_times != "ort" or self.counter_source not in (MEASURED, SIMULATED):
            return dict(self.t_cpu)
        jit = (self.metadata.get("host_times_detail") or {}).get("jit_seconds")
        where = self.source or "the nest profile"
        if not isinstance(jit, dict):
            raise PlacementError(
                f"{where}: ort host times with {self.counter_source} counters need"
                " 'metadata.host_times_detail.jit_seconds' (the counted program's times)"
            )
        out = {}
        for n in self.nests:
            t = jit.get(n.id)
            if not is_nonnegative_number(t):
                raise PlacementError(
                    f"{where}: 'jit_seconds' of nest {n.id!r} must be a time >= 0 s, got {t!r}"
                )
            out[n.id] = float(t)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "model_path": self.model_path,
            "model_sha256": self.model_sha256,
            "source_kind": self.source_kind,
            "nests": [n.to_json() for n in self.nests],
            "t_cpu": self.t_cpu,
            "counters": self.counters,
            "counter_source": self.counter_source,
            "host_times": self.host_times,
            "cache": self.cache,
            "ort_cpu_only": self.ort_cpu_only,
            "host_dram_read": self.host_dram_read,
            "metadata": self.metadata,
        }

    def save(self, path: str | Path) -> None:
        """Write the profile as JSON, atomically (temp file + rename): never half a file."""
        write_json_atomic(Path(path), self.to_json(), "nest profile")

    @classmethod
    def load(cls, path: str | Path) -> NestProfile:
        """Read a nest profile; any problem is a one-line PlacementError naming the file."""
        path = Path(path)
        return cls._from_json(read_json_file(path, "nest profile", "nest profile"), path)

    @classmethod
    def _from_json(cls, data: Any, path: Path) -> NestProfile:
        def bad(what: str) -> PlacementError:
            return PlacementError(f"{path}: invalid nest profile: {what}")

        data = check_header(
            data, path, bad, kind="nest profile", format_name=FORMAT_NAME,
            version=FORMAT_VERSION, rerun="placement profile --target pim",
            keys=("model_path", "model_sha256", "source_kind", "nests", "t_cpu",
                  "counters", "counter_source", "metadata"),
            format_hints={HOST_FORMAT_NAME: " (this is a CIM host profile; use --target cim)"},
        )  # fmt: skip
        model_path, sha = check_model_fields(data, bad)
        if data["source_kind"] not in ("onnx", "mlir"):
            raise bad("'source_kind' must be 'onnx' or 'mlir'")
        raw_nests = data["nests"]
        if not isinstance(raw_nests, list) or not raw_nests:
            raise bad("'nests' must be a non-empty list of loop nests")
        nests = []
        for i, raw in enumerate(raw_nests):
            try:
                nests.append(LoopNest.from_json(raw))
            except (TypeError, KeyError, ValueError, AttributeError) as exc:
                raise bad(f"nest #{i} is not a loop nest ({type(exc).__name__}: {exc})") from None
            except PlacementError as exc:  # a loop nest, but an impossible one
                raise bad(str(exc)) from None
        ids = [n.id for n in nests]
        if len(set(ids)) != len(ids):
            raise bad("nest ids are not unique")
        t_cpu = data["t_cpu"]
        if not isinstance(t_cpu, dict):
            raise bad("'t_cpu' must be an object of nest id -> seconds")
        extra = [k for k in t_cpu if k not in set(ids)]
        if extra:
            raise bad(f"'t_cpu' names unknown nest {extra[0]!r}")
        for nid in ids:
            if nid not in t_cpu:
                raise bad(f"nest {nid!r} has no 't_cpu'")
            if not is_nonnegative_number(t_cpu[nid]):
                raise bad(f"'t_cpu' of nest {nid!r} must be a non-negative number of seconds")
        source = data["counter_source"]
        if not isinstance(source, str) or not (
            source in (MEASURED, FILE, SIMULATED) or source.startswith(f"{UNAVAILABLE}: ")
        ):
            raise bad(
                "'counter_source' must be 'measured', 'file', 'simulated' or"
                " 'unavailable: <reason>'"
            )
        counters = data["counters"]
        if counters is not None:
            events = SIMULATED_EVENTS if source == SIMULATED else TABLE1_EVENTS
            counters = _check_counters(counters, set(ids), bad, events)
        if (counters is None) != source.startswith(UNAVAILABLE):
            raise bad("'counters' must be null exactly when 'counter_source' is 'unavailable'")
        if not isinstance(data["metadata"], dict):
            raise bad("'metadata' must be an object")
        host_times = data.get("host_times", LEGACY_HOST_TIMES)
        if host_times not in HOST_TIME_SOURCES:
            raise bad(f"'host_times' must be one of {', '.join(HOST_TIME_SOURCES)}")
        cache = data.get("cache", "warm")
        if cache not in CACHE_STATES:
            raise bad("'cache' must be 'warm' or 'cold'")
        ort_cpu_only = data.get("ort_cpu_only")
        if ort_cpu_only is not None and not is_nonnegative_number(ort_cpu_only):
            raise bad("'ort_cpu_only' must be a non-negative number of seconds or null")
        host_dram_read = data.get("host_dram_read")
        if host_dram_read is not None and not (
            isinstance(host_dram_read, dict)
            and is_nonnegative_number(host_dram_read.get("gbps"))
            and host_dram_read["gbps"] > 0
        ):
            raise bad("'host_dram_read' must be null or an object with 'gbps' > 0 (B_cpu)")
        return cls(
            nests=nests,
            t_cpu={k: float(t_cpu[k]) for k in ids},
            counters=counters,
            counter_source=source,
            model_sha256=sha,
            model_path=model_path,
            source_kind=data["source_kind"],
            metadata=data["metadata"],
            source=str(path),
            host_times=host_times,
            cache=cache,
            ort_cpu_only=None if ort_cpu_only is None else float(ort_cpu_only),
            host_dram_read=host_dram_read,
        )

    def check_matches(self, sha256: str, path_for_message: str) -> None:
        """Refuse a profile measured on a different model file (hash mismatch)."""
        check_model_match(
            kind="nest profile", source=self.source, model_path=self.model_path,
            model_sha256=self.model_sha256, sha256=sha256, path_for_message=path_for_message,
            fresh_suffix=".nests.json", profile_flags=" --target pim",
        )  # fmt: skip


def _check_counters(
    counters: Any, ids: set[str], bad: Any, names: tuple[str, ...] = TABLE1_EVENTS
) -> dict[str, dict[str, float]]:
    if not isinstance(counters, dict):
        raise bad("'counters' must be an object of nest id -> {event: count} or null")
    out: dict[str, dict[str, float]] = {}
    for nid, events in counters.items():
        if nid not in ids:
            raise bad(f"'counters' names unknown nest {nid!r}")
        if not isinstance(events, dict):
            raise bad(f"counters of nest {nid!r} must be an object of event -> count")
        row = {event_key(k): v for k, v in events.items()}
        missing = [e for e in names if e not in row]
        if missing:
            raise bad(f"counters of nest {nid!r} miss event(s) {', '.join(missing)}")
        for e in names:
            if not is_nonnegative_number(row[e]):  # same test: finite, >= 0
                raise bad(f"counter {e} of nest {nid!r} must be a count >= 0")
        out[nid] = {e: float(row[e]) for e in names}
    return out
