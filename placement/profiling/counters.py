"""Table 1 hardware events per loop nest (Torch-PIM, Section 4.3): availability, counting, files.

Counting uses Linux ``perf_event_open(2)`` through a ctypes syscall (no PAPI, no ``perf``
binary). The five events of Table 1 are opened as one group with a *pinned* leader, so
they are never multiplexed: a group that does not fit on the PMU goes into an error state
and is reported, never scaled up (the paper: "no counter is multiplexed"). The group is
read at every ``placement_nest_enter``/``placement_nest_exit`` marker of the JIT-compiled
program (the same markers :mod:`placement.profiling.nest_timing` times with) and the
differences are accumulated per nest. This is a separate run from the timing run, as in
the paper, so counter reads never inflate ``T_cpu``.

Raw encodings (``config = event | umask << 8 | cmask << 24``, Intel core PMU), Ice Lake
(family 6, models 0x6a/0x6c Ice Lake-SP/D, 0x7d/0x7e client), taken from Intel's published
event lists (perfmon ``icelake``/``icelakex`` pipeline and cache files):

=================================  =====  =====  =====  ============
event                              event  umask  cmask  raw config
=================================  =====  =====  =====  ============
offcore_requests.all_data_rd       0xb0   0x08   -      0x000008b0
exe_activity.bound_on_stores       0xa6   0x40   2      0x020040a6
cycle_activity.stalls_total        0xa3   0x04   4      0x040004a3
exe_activity.1_ports_util          0xa6   0x02   -      0x000002a6
exe_activity.2_ports_util          0xa6   0x04   -      0x000004a6
=================================  =====  =====  =====  ============

UNVERIFIED ON HARDWARE: the machine this was written on is a VM without a virtual PMU,
so only the reading mechanism was exercised (with software events, see the tests). On
any other CPU the raw codes differ and counting is reported unavailable with the reason;
counters measured elsewhere can be loaded with :func:`load_counters`.

Counter files (``--counters FILE``), keyed by nest id:

* CSV: a header with ``nest_id`` and the five event names (case-insensitive; a PAPI
  ``component::`` prefix is accepted), one row per nest. Extra columns are ignored.
* JSON: ``{"<nest id>": {"<event>": count, ...}, ...}``, optionally wrapped as
  ``{"counters": {...}}``.

Nests absent from the file get no counters (the rule then reports C3/C4 "not evaluated").

Simulated counters (``SIMULATED_EVENTS``, prefix ``sim.``) stand in for the Table 1 events
where no PMU exists: :mod:`placement.profiling.simulated` derives them from a callgrind
cache simulation of the same program. They are not hardware events and are always
labelled ``simulated``; how the rule uses them is in :mod:`placement.pim.rules`.

Counter sources (:func:`select_source`): ``perf`` (this module, Ice Lake PMUs),
``simulated`` (needs valgrind and gcc), ``none``, or ``auto``: perf where the PMU can
count Table 1, else the simulation where valgrind and gcc are installed, else none,
with the reasons.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from placement.errors import PlacementError
from placement.io import (
    check_known_nests,
    csv_records,
    nonnegative_value,
    parse_json,
    read_table_file,
)

if TYPE_CHECKING:
    from placement.profiling.mlir.lower import LoweredProgram

# Table 1 events (lower case; PAPI's "component::" prefixes are stripped on lookup)
EV_OFFCORE_RD = "offcore_requests.all_data_rd"  # n_rd
EV_BOUND_ON_STORES = "exe_activity.bound_on_stores"  # c_store
EV_STALLS_TOTAL = "cycle_activity.stalls_total"
EV_1_PORTS_UTIL = "exe_activity.1_ports_util"
EV_2_PORTS_UTIL = "exe_activity.2_ports_util"
BACKEND_EVENTS = (EV_STALLS_TOTAL, EV_1_PORTS_UTIL, EV_2_PORTS_UTIL)
TABLE1_EVENTS = (EV_OFFCORE_RD, EV_BOUND_ON_STORES, *BACKEND_EVENTS)

# Simulated events (placement.profiling.simulated): callgrind's counts per nest, and the
# off-core bytes they imply (LL misses x the simulated LL's line size).
SIM_INSTRUCTIONS = "sim.instructions"  # Ir
SIM_DATA_READS = "sim.data_reads"  # Dr
SIM_DATA_WRITES = "sim.data_writes"  # Dw
SIM_D1_READ_MISSES = "sim.l1d_read_misses"  # D1mr
SIM_D1_WRITE_MISSES = "sim.l1d_write_misses"  # D1mw
SIM_LL_READ_MISSES = "sim.ll_read_misses"  # DLmr: the stand-in for n_rd
SIM_LL_WRITE_MISSES = "sim.ll_write_misses"  # DLmw: stores that miss the core's caches
SIM_OFFCORE_READ_BYTES = "sim.offcore_read_bytes"  # DLmr x line: C3's n_rd * L
SIM_OFFCORE_WRITE_BYTES = "sim.offcore_write_bytes"  # DLmw x line (read-for-ownership)
SIMULATED_EVENTS = (
    SIM_INSTRUCTIONS, SIM_DATA_READS, SIM_DATA_WRITES, SIM_D1_READ_MISSES,
    SIM_D1_WRITE_MISSES, SIM_LL_READ_MISSES, SIM_LL_WRITE_MISSES, SIM_OFFCORE_READ_BYTES,
    SIM_OFFCORE_WRITE_BYTES,
)  # fmt: skip

# Counter sources (see the module docstring).
AUTO, PERF, SIMULATED, NONE = "auto", "perf", "simulated", "none"
COUNTER_SOURCES = (AUTO, PERF, SIMULATED, NONE)

PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_RAW = 4
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_PAGE_FAULTS = 2

_FORMAT_TOTAL_TIME_ENABLED = 1
_FORMAT_TOTAL_TIME_RUNNING = 2
_FORMAT_GROUP = 8
_FLAG_DISABLED = 1 << 0
_FLAG_PINNED = 1 << 2
_FLAG_EXCLUDE_KERNEL = 1 << 5  # perf_event_paranoid 2 allows user-space counting only
_FLAG_EXCLUDE_HV = 1 << 6
_IOC_ENABLE = 0x2400
_IOC_DISABLE = 0x2401
_IOC_RESET = 0x2403
_SYSCALL = {"x86_64": 298, "amd64": 298, "aarch64": 241, "arm64": 241}

ICELAKE_MODELS = {
    0x6A: "Ice Lake-SP",
    0x6C: "Ice Lake-D",
    0x7D: "Ice Lake (client)",
    0x7E: "Ice Lake (client)",
}


@dataclass(frozen=True)
class PerfEvent:
    name: str  # a Table 1 name (lower case), or any label for generic events
    type: int  # PERF_TYPE_*
    config: int


ICELAKE_TABLE1: tuple[PerfEvent, ...] = (
    PerfEvent(EV_OFFCORE_RD, PERF_TYPE_RAW, 0x000008B0),
    PerfEvent(EV_BOUND_ON_STORES, PERF_TYPE_RAW, 0x020040A6),
    PerfEvent(EV_STALLS_TOTAL, PERF_TYPE_RAW, 0x040004A3),
    PerfEvent(EV_1_PORTS_UTIL, PERF_TYPE_RAW, 0x000002A6),
    PerfEvent(EV_2_PORTS_UTIL, PERF_TYPE_RAW, 0x000004A6),
)


class CountersUnavailable(Exception):
    """Hardware counters cannot be read here; ``reason`` is one line saying why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Attr(ctypes.Structure):
    """``struct perf_event_attr`` up to ``config1`` (PERF_ATTR_SIZE_VER0 = 64 bytes)."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
    ]


# --------------------------------------------------------------------------- perf_event_open


def _perf_event_open(event: PerfEvent, group_fd: int, flags: int, read_format: int) -> int:
    """The raw syscall for the calling thread on any CPU; raises OSError with errno."""
    number = _SYSCALL.get(platform.machine().lower())
    if number is None:
        raise OSError(errno.ENOSYS, f"perf_event_open: unknown syscall on {platform.machine()}")
    attr = _Attr()
    attr.type = event.type
    attr.size = ctypes.sizeof(_Attr)
    attr.config = event.config
    attr.read_format = read_format
    attr.flags = flags
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(
        ctypes.c_long(number), ctypes.byref(attr), ctypes.c_int(0), ctypes.c_int(-1),
        ctypes.c_int(group_fd), ctypes.c_ulong(0),
    )  # fmt: skip
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(fd)


class PerfGroup:
    """One event group, never multiplexed, counting user-space work of this thread.

    ``read()`` returns the running totals of every event in ``events`` order; callers
    take differences. A group that could not be scheduled whole raises
    :class:`CountersUnavailable` on read.
    """

    def __init__(self, events: Sequence[PerfEvent]) -> None:
        if not events:
            raise ValueError("an event group needs at least one event")
        self.events = tuple(events)
        self._fds: list[int] = []
        fmt = _FORMAT_GROUP | _FORMAT_TOTAL_TIME_ENABLED | _FORMAT_TOTAL_TIME_RUNNING
        base = _FLAG_EXCLUDE_KERNEL | _FLAG_EXCLUDE_HV
        try:
            for i, event in enumerate(self.events):
                leader = self._fds[0] if self._fds else -1
                flags = base | (_FLAG_PINNED | _FLAG_DISABLED if i == 0 else 0)
                self._fds.append(_perf_event_open(event, leader, flags, fmt))
        except OSError as exc:
            self.close()
            name = self.events[len(self._fds)].name
            raise CountersUnavailable(
                f"perf_event_open({name}) failed: {exc.strerror or exc}"
            ) from None
        self._size = 8 * (3 + len(self.events))
        self._unpack = struct.Struct(f"<{3 + len(self.events)}Q").unpack
        self._ioctl(_IOC_RESET)
        self._ioctl(_IOC_ENABLE)

    def _ioctl(self, request: int) -> None:
        import fcntl

        fcntl.ioctl(self._fds[0], request, 1)  # 1 = PERF_IOC_FLAG_GROUP

    def read(self) -> tuple[int, ...]:
        data = os.read(self._fds[0], self._size)
        if len(data) != self._size:
            # A pinned group that lost its counters reads as end-of-file.
            raise CountersUnavailable(
                "the counter group could not be scheduled on the PMU without multiplexing"
            )
        values = self._unpack(data)
        if values[2] != values[1]:  # time_running < time_enabled: multiplexed
            raise CountersUnavailable("the counter group was multiplexed; counts would be scaled")
        return values[3:]

    def close(self) -> None:
        for fd in reversed(self._fds):
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []

    def __enter__(self) -> PerfGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- detection


def cpu_signature() -> tuple[str, int | None, int | None]:
    """(vendor, family, model) from /proc/cpuinfo; None where unknown."""
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or "unknown", None, None

    def field(key: str) -> str | None:
        match = re.search(rf"^{key}\s*:\s*(.+)$", info, flags=re.MULTILINE)
        return match.group(1).strip() if match else None

    def number(key: str) -> int | None:
        value = field(key)
        return int(value) if value is not None and value.isdigit() else None

    return field("vendor_id") or "unknown", number("cpu family"), number("model")


def paranoid_level() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def check_perf_events() -> None:
    """Raise :class:`CountersUnavailable` unless this process can count hardware events."""
    if platform.system() != "Linux":
        raise CountersUnavailable(f"perf events need Linux, this is {platform.system()}")
    level = paranoid_level()
    if level is None:
        raise CountersUnavailable(
            "the kernel has no perf events (/proc/sys/kernel/perf_event_paranoid missing)"
        )
    if level > 2:
        raise CountersUnavailable(
            f"perf_event_paranoid is {level}: unprivileged processes may not open perf events"
            " (set it to 2 or lower)"
        )
    cycles = PerfEvent("cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES)
    try:
        fd = _perf_event_open(cycles, -1, _FLAG_EXCLUDE_KERNEL | _FLAG_EXCLUDE_HV | 1, 0)
    except OSError as exc:
        code = exc.errno
        if code in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
            raise CountersUnavailable(
                "this machine exposes no hardware performance counters (perf_event_open of"
                f" the generic 'cycles' event: {exc.strerror}); typical of a virtual machine"
                " without a virtual PMU"
            ) from None
        if code in (errno.EACCES, errno.EPERM):
            raise CountersUnavailable(
                f"opening hardware perf events is not permitted ({exc.strerror};"
                f" perf_event_paranoid is {level})"
            ) from None
        raise CountersUnavailable(f"perf_event_open failed: {exc.strerror or exc}") from None
    os.close(fd)


def table1_events() -> tuple[PerfEvent, ...]:
    """The Table 1 group for this CPU, opened once as a check; else CountersUnavailable."""
    check_perf_events()
    vendor, family, model = cpu_signature()
    if vendor != "GenuineIntel" or family != 6 or model not in ICELAKE_MODELS:
        shown = "unknown" if model is None else f"0x{model:x}"
        known = ", ".join(f"0x{m:x}" for m in ICELAKE_MODELS)
        raise CountersUnavailable(
            "hardware counters exist, but the raw codes of the Table 1 events are known here"
            f" only for Intel Ice Lake (family 6, model {known}); this CPU is {vendor}"
            f" family {family} model {shown}"
        )
    with PerfGroup(ICELAKE_TABLE1) as group:
        group.read()
    return ICELAKE_TABLE1


# --------------------------------------------------------------------------- cache simulator


def check_simulator() -> dict[str, str]:
    """Versions of valgrind and gcc for the simulated counters; :class:`CountersUnavailable`
    naming the package to install when either (or callgrind's header) is missing."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise CountersUnavailable(
            "the cache simulator valgrind is not installed (install the package `valgrind`,"
            " e.g. apt-get install valgrind)"
        )
    gcc = shutil.which("gcc")
    if gcc is None:
        raise CountersUnavailable(
            "the C compiler gcc, needed to build the cache simulation's driver, is not"
            " installed (install the package `gcc`, e.g. apt-get install gcc)"
        )
    if not _compiles_with_callgrind_header(gcc):
        raise CountersUnavailable(
            "gcc cannot find valgrind/callgrind.h (install the package `valgrind`; where"
            " headers are packaged separately, `valgrind-devel`)"
        )
    return {
        "valgrind": _tool_version([valgrind, "--version"]).removeprefix("valgrind-"),
        "gcc": _tool_version([gcc, "-dumpfullversion"]),
    }


def _tool_version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def _compiles_with_callgrind_header(gcc: str) -> bool:
    try:
        out = subprocess.run(
            [gcc, "-E", "-x", "c", "-", "-o", os.devnull],
            input="#include <valgrind/callgrind.h>\n", capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


# --------------------------------------------------------------------------- source selection


@dataclass(frozen=True)
class SourceChoice:
    """Which counter source a profile uses: ``source`` is PERF, SIMULATED or None (no
    counters, ``reason`` says why); ``events`` the perf group, ``tools`` the simulator's
    versions; ``skipped`` why the sources tried before this one were passed over."""

    source: str | None
    reason: str | None = None
    events: tuple[PerfEvent, ...] = ()
    tools: Mapping[str, str] | None = None
    skipped: tuple[str, ...] = ()


def select_source(requested: str | bool = AUTO) -> SourceChoice:
    """The counter source for ``requested`` (one of :data:`COUNTER_SOURCES`; ``True`` and
    ``False`` mean auto and none). ``auto`` never fails: it falls back to none with the
    reasons. An explicit ``perf`` or ``simulated`` that cannot be had raises
    :class:`CountersUnavailable`."""
    if requested is True:
        requested = AUTO
    elif requested is False:
        requested = NONE
    if requested not in COUNTER_SOURCES:
        raise PlacementError(
            f"unknown counter source {requested!r}; known: {', '.join(COUNTER_SOURCES)}"
        )
    if requested == NONE:
        return SourceChoice(None, "not requested")
    if requested == PERF:
        return SourceChoice(PERF, events=table1_events())
    if requested == SIMULATED:
        return SourceChoice(SIMULATED, tools=check_simulator())
    try:
        return SourceChoice(PERF, events=table1_events())
    except CountersUnavailable as exc:
        perf_reason = exc.reason
    try:
        return SourceChoice(SIMULATED, tools=check_simulator(), skipped=(perf_reason,))
    except CountersUnavailable as exc:
        return SourceChoice(
            None, f"{perf_reason}; no simulated counters either: {exc.reason}",
            skipped=(perf_reason, exc.reason),
        )  # fmt: skip


# --------------------------------------------------------------------------- per-nest counting


def count_nests(
    program: LoweredProgram,
    events: Sequence[PerfEvent],
    *,
    runs: int = 5,
    warmup: int = 1,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict[str, float]]:
    """Per nest, each event accumulated over the nest's invocations in one program run
    (median over ``runs`` after ``warmup`` runs)."""
    if runs < 1 or warmup < 0:
        raise PlacementError(f"runs must be >= 1 and warmup >= 0 (got {runs}, {warmup})")
    from torch_mlir.runtime.np_to_memref import get_ranked_memref_descriptor

    from placement.profiling.nest_timing import jit_with_markers, program_arguments

    count = len(program.nests)
    n_events = len(events)
    acc = [[0] * n_events for _ in range(count)]
    starts: list[tuple[int, ...]] = [()] * count
    failure: list[CountersUnavailable] = []

    with PerfGroup(events) as group:
        read = group.read

        def enter(k: int) -> None:
            try:
                starts[k] = read()
            except CountersUnavailable as exc:  # must not raise through the JIT frame
                failure.append(exc)

        def exit_(k: int) -> None:
            try:
                now = read()
            except CountersUnavailable as exc:
                failure.append(exc)
                return
            if starts[k]:
                row = acc[k]
                for j in range(n_events):
                    row[j] += now[j] - starts[k][j]

        engine, callbacks = jit_with_markers(program, enter, exit_)
        arrays = program_arguments(program, seed)
        descriptors = [get_ranked_memref_descriptor(a) for a in arrays]
        pointers = [ctypes.pointer(ctypes.pointer(d)) for d in descriptors]
        packed = (ctypes.c_void_p * len(pointers))(
            *[ctypes.cast(p, ctypes.c_void_p) for p in pointers]
        )
        entry = engine.lookup(program.func_name)
        samples: list[list[list[int]]] = []
        for i in range(warmup + runs):
            for row in acc:
                row[:] = [0] * n_events
            entry(packed)
            if failure:
                raise failure[0]
            if i >= warmup:
                samples.append([list(row) for row in acc])
                if progress is not None:
                    progress(i - warmup + 1, runs)
        del callbacks, engine
    return {
        nest.id: {
            ev.name: float(statistics.median(s[k][j] for s in samples))
            for j, ev in enumerate(events)
        }
        for k, nest in enumerate(program.nests)
    }


# --------------------------------------------------------------------------- counter files


def event_key(name: str) -> str:
    """Canonical event name: lower case, PAPI ``component::`` prefix stripped."""
    return name.strip().lower().rsplit("::", 1)[-1]


def load_counters(path: str | Path, nest_ids: Iterable[str]) -> dict[str, dict[str, float]]:
    """Table 1 counters per nest from a CSV or JSON file; one-line errors naming the fault."""
    path = Path(path)
    ids = list(nest_ids)
    text, is_json = read_table_file(path, "counters")
    table = _parse_json(text, path) if is_json else _parse_csv(text, path)
    check_known_nests(table, ids, path)
    return {nid: table[nid] for nid in ids if nid in table}


def _parse_csv(text: str, path: Path) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    columns = ("nest_id", *TABLE1_EVENTS)
    for line_no, row in csv_records(text, path, "counters", columns, event_key):
        nid = row["nest_id"].strip()
        if not nid:
            raise PlacementError(f"{path}: line {line_no}: empty nest_id")
        if nid in table:
            raise PlacementError(f"{path}: line {line_no}: nest {nid!r} appears twice")
        table[nid] = {
            ev: nonnegative_value(row[ev], f"{path}: line {line_no}, nest {nid!r}, column {ev}")
            for ev in TABLE1_EVENTS
        }
    return table


def _parse_json(text: str, path: Path) -> dict[str, dict[str, float]]:
    data = parse_json(text, path, "counters file", "count")
    if isinstance(data, dict) and isinstance(data.get("counters"), dict):
        data = data["counters"]
    if not isinstance(data, dict):
        raise PlacementError(f"{path}: expected an object of nest id -> {{event: count}}")
    table: dict[str, dict[str, float]] = {}
    for nid, events in data.items():
        if not isinstance(events, dict):
            raise PlacementError(f"{path}: nest {nid!r}: expected an object of event -> count")
        by_key = {event_key(k): v for k, v in events.items()}
        missing = [e for e in TABLE1_EVENTS if e not in by_key]
        if missing:
            raise PlacementError(f"{path}: nest {nid!r}: missing event(s) {', '.join(missing)}")
        table[nid] = {
            e: nonnegative_value(by_key[e], f"{path}: nest {nid!r}, event {e}")
            for e in TABLE1_EVENTS
        }
    return table
