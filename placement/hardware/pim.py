"""Typed CPU + PIM machine description (Torch-PIM, Table 2 and Sections 4.4, 5.1).

Mirrors :mod:`placement.hardware.cim`: files name their units in the keys
(``clock_ghz``, ``t_sw_us``, ``read_gbps``), converted once, here, to seconds,
hertz and bytes per second (1 GB/s = 1e9 B/s). A user file may start from a
preset with ``base = "pim-icelake"`` and override only some keys.

Every constant below carries its source: the paper (section or table), a cited
system, or "assumption" with the reason. The preset files repeat the sources
beside each key (``placement/hardware/presets/pim-*.toml``); the T_pim model the
constants feed is documented in :mod:`placement.devices.pim`.

Defaults (the ``pim-icelake`` preset, also the dataclass defaults):

* 32 in-order single-issue cores at 1 GHz, ``I_min = 1`` (Table 2; Section 4.4, C1).
* ``T_sw = 2 us`` (Section 5.2, Eq. 9: "the 2 us adopted by PIMProf"). ``T_ctx`` of
  C1 is not given by the paper; assumption: equal to ``T_sw`` (one switch to the
  memory side).
* ``B_cpu = 16.754 GB/s``, the paper's platform figure (Section 4.4), so that
  ``theta = 0.12 * B_cpu = 2.01 GB/s`` -- the 2.0 GB/s the paper adopts.
  (1.80 GB/s is only the lower end of its calibration interval.)
* ``B_rd = B_wb = B_cpu``: "the bandwidth of the host memory system for both"
  (Section 5.1).
* ``sigma = 0.4`` (Section 4.4, TMA's most conservative store-bound value), ``L = 64 B``
  (Section 4.4, Eq. 6).
* T_pim model constants (assumptions; the paper measures T_pim in the PIMProf/Sniper
  simulator and publishes no model):

  - ``bank_gbps_per_core`` = 8 GB/s of bank bandwidth per core: 1 TB/s aggregate at
    128 cores, the "terabyte-per-second scale" Section 5.1 reports for real systems
    (its reference [23] is garbled in the text; the PrIM study of UPMEM measures
    628.23 MB/s of MRAM read bandwidth per DPU on its 2,556-DPU system, 1.6 TB/s in all:
    the same scale; slides 12 and 30 of its authors' slides, cited in ``pim-upmem.toml``);
  - ``t_sync_ns_per_core`` = 100 ns of synchronization and result aggregation per
    participating core and invocation: one serialized, dependent DRAM-latency access
    per core (a centralized barrier counter, or the host collecting each core's
    completion flag and partial result; PIM cores share no cache, and UPMEM's DPUs
    cannot communicate except through the host). 100 ns is the order of one DRAM
    round trip on a server CPU (assumption, not measured). With the paper's Table 2
    core counts it makes nests with less than ``2 * 64**2 * 100 ns = 819 us`` of
    single-core work slower on 128 cores than on 64 (layernorm's small nests, the
    paper's Section 5.2 observation), while streaming nests keep speeding up; the
    closed form is in :mod:`placement.devices.pim`. Until this version the default
    was 10 ns, which moves the crossover to 82 us: too little for layernorm's nests at
    the benchmark set's sizes (0.2-0.4 ms each at 64 x 1024) to slow down.

* The memory architecture (``memory``): how the host and the PIM cores reach memory,
  which decides what the default copy accounting charges
  (:mod:`placement.models.pim_loopnest.copy_terms`):

  - ``shared``: host and PIM address the same DRAM (the paper's Section 2 devices:
    HBM-PIM, GDDR6-AiM, LPDDR5X-PIM). Needs ``host_cache_mib``, the most the host's
    caches can hold dirty of one buffer (pim-icelake: one core's L1d and L2 and the
    socket's L3 of Table 2, 43.3 MiB). Write-backs and re-reads run at ``B_wb``/``B_rd``.
  - ``partitioned``: each PIM core reaches only its own bank (UPMEM). Needs the link
    bandwidths ``link_to_pim_gbps`` and ``link_to_host_gbps``; ``bank_mib_per_core``
    (optional) bounds the weights kept in the banks.
  - absent (files written before the key): no architecture stated; the default copy
    accounting is then Eq. 8, the paper's upper bound.

* T_pim instruction cost table (:meth:`PimSpec.op_instructions`). A nest measured from
  the MLIR (``LoopNest.body_ops``) costs, per executed op:

  - ``op_instr`` = 1: integer arith.*, memref.load/store, arith.select, arith.negf,
    any other counted op, and the bit-level math.* ops (absf, copysign, ctlz, isnan ...);
  - ``mul_instr`` = 1: integer multiplies (arith.muli, mulsi_extended,
    mului_extended): a core without a hardware multiplier emulates them in software;
  - ``fadd_instr`` = 1: float add/subtract/compare/min/max (arith.addf, subf, cmpf,
    maximumf, minimumf, maxnumf, minnumf), int<->float and float width conversions
    (sitofp, uitofp, fptosi, fptoui, extf, truncf) and float rounding (math.floor,
    ceil, round, roundeven, trunc);
  - ``fmul_instr`` = 1: arith.mulf; ``math.fma`` costs ``fmul + fadd - op``
    (a multiply and an add sharing one issue slot: 1 with an FPU);
  - ``div_instr`` = 4: integer divisions and remainders (arith.divsi/divui, remsi,
    remui, ceildiv*, floordiv*); ``fdiv_instr`` = 4: arith.divf, remf;
  - ``transcendental_instr`` = 20: every other math.* op (exp, tanh, erf, log,
    sqrt, rsqrt, powf, sin ...).

  ``mul_instr``/``fadd_instr``/``fmul_instr`` default to ``op_instr`` and ``fdiv_instr`` to
  ``div_instr`` when a file leaves them out (a core with an FPU: files written before
  these keys keep their costs). The pim-icelake core is single-issue, in-order, and
  assumed to have a pipelined FPU, so a plain op is one instruction (loads and stores:
  their latency is the memory term of T_pim). Division is iterative on small cores:
  4 is an assumption. A transcendental is a libm-style software routine: range
  reduction plus a polynomial, about 20 instructions for ``expf`` (MLIR's own
  ``math-expand-ops`` turns ``tanh`` into one ``exp`` plus ten arith ops including a
  division, so tanh/erf cost at least this much). 20 is an assumption, not a measured
  or published figure. Cores without an FPU emulate float ops in software at tens to
  hundreds of instructions each: the ``pim-upmem`` preset prices them from the PrIM
  study's measured throughputs. A SIMD core counts an instruction per lane: the
  ``pim-hbm`` preset (Samsung HBM-PIM, an FP16 add/multiply/MAC unit) sets
  ``issue_width`` to its 16 lanes, and prices the ops its ISA lacks (division,
  transcendentals) so high that nests using them stay on the host. Every preset states
  the sources of its constants beside each key. Nests without ``body_ops`` (hand-built, profiles
  written before the field) are charged ``instr_per_iter`` = 4 instructions per
  innermost iteration (load, op, store, loop; assumption) instead. Loop and index
  bookkeeping is not in ``body_ops`` and not charged.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.hardware.base import (
    HostSpec,
    check_file_value,
    description_builder,
    load_description,
    preset_names,
    spec_fields,
)

# File key -> (PimSpec field, factor to SI, must be a whole number)
PIM_KEYS: dict[str, tuple[str, float, bool]] = {
    "cores": ("cores", 1.0, True),
    "clock_ghz": ("clock", 1e9, False),
    "issue_width": ("issue_width", 1.0, True),
    "i_min": ("i_min", 1.0, False),
    "t_ctx_us": ("t_ctx", 1e-6, False),
    "t_sw_us": ("t_sw", 1e-6, False),
    "host_dram_gbps": ("host_dram_bandwidth", 1e9, False),
    "theta_ratio": ("theta_ratio", 1.0, False),
    "sigma": ("sigma", 1.0, False),
    "cache_line_bytes": ("cache_line", 1.0, True),
    "read_gbps": ("read_bandwidth", 1e9, False),
    "writeback_gbps": ("writeback_bandwidth", 1e9, False),
    "instr_per_iter": ("instr_per_iter", 1.0, False),
    "bank_gbps_per_core": ("bank_bandwidth_per_core", 1e9, False),
    "t_sync_ns_per_core": ("t_sync_per_core", 1e-9, False),
    "op_instr": ("op_instr", 1.0, False),
    "mul_instr": ("mul_instr", 1.0, False),
    "fadd_instr": ("fadd_instr", 1.0, False),
    "fmul_instr": ("fmul_instr", 1.0, False),
    "div_instr": ("div_instr", 1.0, False),
    "fdiv_instr": ("fdiv_instr", 1.0, False),
    "transcendental_instr": ("transcendental_instr", 1.0, False),
    "host_cache_mib": ("host_cache", 2.0**20, False),
    "link_to_pim_gbps": ("link_to_pim_bandwidth", 1e9, False),
    "link_to_host_gbps": ("link_to_host_bandwidth", 1e9, False),
    "bank_mib_per_core": ("bank_capacity_per_core", 2.0**20, False),
}
#: ``memory``: how the host and the PIM cores reach memory (module docstring).
SHARED = "shared"
PARTITIONED = "partitioned"
MEMORY_ARCHITECTURES = (SHARED, PARTITIONED)
# The memory architecture's keys: each needed by one architecture, unset (None) otherwise.
_MEMORY_KEYS = frozenset(
    {"host_cache_mib", "link_to_pim_gbps", "link_to_host_gbps", "bank_mib_per_core"}
)
_NEEDED_BY = {
    SHARED: ("host_cache_mib",),
    PARTITIONED: ("link_to_pim_gbps", "link_to_host_gbps"),
}
# Keys a file may leave out: the cost-table keys added after files existed (PimSpec
# defaults apply; the float costs then follow op_instr / div_instr, see the module
# docstring), and the memory architecture's (checked against ``memory`` instead).
_OPTIONAL_KEYS = (
    frozenset(
        {"op_instr", "mul_instr", "fadd_instr", "fmul_instr", "div_instr", "fdiv_instr",
         "transcendental_instr"}
    )
    | _MEMORY_KEYS
)  # fmt: skip
# Cost-table fields that, left unset (None), cost what another field costs.
_FOLLOWS = {
    "mul_instr": "op_instr", "fadd_instr": "op_instr", "fmul_instr": "op_instr",
    "fdiv_instr": "div_instr",
}  # fmt: skip

# Op kinds of the instruction cost table (module docstring).
DIV_OPS = frozenset(
    {
        "arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.ceildivsi",
        "arith.ceildivui", "arith.floordivsi",
    }
)  # fmt: skip
FDIV_OPS = frozenset({"arith.divf", "arith.remf"})
FMUL_OPS = frozenset({"arith.mulf"})
MUL_OPS = frozenset({"arith.muli", "arith.mulsi_extended", "arith.mului_extended"})
FADD_OPS = frozenset(
    {
        "arith.addf", "arith.subf", "arith.cmpf", "arith.maximumf", "arith.minimumf",
        "arith.maxnumf", "arith.minnumf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
        "arith.fptoui", "arith.extf", "arith.truncf", "math.floor", "math.ceil", "math.round",
        "math.roundeven", "math.trunc",
    }
)  # fmt: skip
FMA_OP = "math.fma"
# math.* ops that are bit manipulations (one or a few integer instructions, FPU or not).
CHEAP_MATH_OPS = frozenset(
    {
        "math.absf", "math.absi", "math.copysign", "math.ctlz", "math.cttz", "math.ctpop",
        "math.isnan", "math.isinf", "math.isfinite", "math.isnormal",
    }
)  # fmt: skip
_FIELD_KEY = {field: key for key, (field, _, _) in PIM_KEYS.items()}


@dataclass(frozen=True)
class PimSpec:
    """PIM side and rule constants, in SI units. Validated on construction."""

    cores: int = 32  # N_core (C2, C1 bound, T_pim)
    clock: float = 1e9  # f_pim, Hz
    issue_width: int = 1  # instructions per cycle per core (single-issue)
    i_min: float = 1.0  # I_min (C1)
    t_ctx: float = 2e-6  # T_ctx (C1), seconds
    t_sw: float = 2e-6  # T_sw (Eq. 9), seconds per host<->PIM transition
    host_dram_bandwidth: float = 16.754e9  # B_cpu, B/s
    theta_ratio: float = 0.12  # theta = theta_ratio * B_cpu (C3)
    sigma: float = 0.4  # C4 threshold on StoreBound
    cache_line: int = 64  # L, bytes (Eq. 6)
    read_bandwidth: float = 16.754e9  # B_rd (Eq. 8), B/s
    writeback_bandwidth: float = 16.754e9  # B_wb (Eq. 8), B/s
    instr_per_iter: float = 4.0  # T_pim: instructions per innermost iteration
    bank_bandwidth_per_core: float = 8e9  # T_pim: PIM-side bank bandwidth per core, B/s
    t_sync_per_core: float = 100e-9  # T_pim: sync/aggregation per participating core, s
    op_instr: float = 1.0  # T_pim cost table: instructions per integer/memref/other op
    mul_instr: float | None = None  # per integer multiply; None: op_instr
    fadd_instr: float | None = None  # per float add/sub/cmp/convert; None: op_instr
    fmul_instr: float | None = None  # per float multiply; None: op_instr
    div_instr: float = 4.0  # T_pim cost table: instructions per integer division / remainder
    fdiv_instr: float | None = None  # per float division / remainder; None: div_instr
    transcendental_instr: float = 20.0  # T_pim cost table: per math.exp/tanh/erf/log/sqrt/...
    # The memory architecture (module docstring): "shared" or "partitioned"; None = not
    # stated (a file without the key: Eq. 8 is then the default copy accounting).
    memory: str | None = SHARED
    host_cache: float | None = 43.3 * 2**20  # shared: bytes the host's caches can hold dirty
    link_to_pim_bandwidth: float | None = None  # partitioned: host -> PIM banks, B/s
    link_to_host_bandwidth: float | None = None  # partitioned: PIM banks -> host, B/s
    bank_capacity_per_core: float | None = None  # partitioned: bytes per PIM core's bank

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if field.name == "memory":
                continue
            key = _FIELD_KEY[field.name]
            _, scale, integral = PIM_KEYS[key]
            value = getattr(self, field.name)
            if value is None and (field.name in _FOLLOWS or key in _MEMORY_KEYS):
                continue
            shown = value / scale if scale != 1.0 and isinstance(value, (int, float)) else value
            check_file_value(value, f"pim.{key}", integral, "PimSpec", shown)
        _check_relations(self, "PimSpec")
        _check_memory(self, "PimSpec")

    @property
    def theta(self) -> float:
        """C3 threshold on the read bandwidth, B/s."""
        return self.theta_ratio * self.host_dram_bandwidth

    def cost(self, field: str) -> float:
        """The cost-table entry ``field`` (``fadd_instr`` ...), its fallback when unset."""
        value = getattr(self, field)
        return getattr(self, _FOLLOWS[field]) if value is None else value

    def op_instructions(self, op_name: str) -> float:
        """Instructions one execution of ``op_name`` costs on a PIM core (the cost table)."""
        if op_name in FADD_OPS:
            return self.cost("fadd_instr")
        if op_name in FMUL_OPS:
            return self.cost("fmul_instr")
        if op_name in MUL_OPS:
            return self.cost("mul_instr")
        if op_name == FMA_OP:  # a multiply and an add in one issue slot
            return self.cost("fmul_instr") + self.cost("fadd_instr") - self.op_instr
        if op_name in DIV_OPS:
            return self.div_instr
        if op_name in FDIV_OPS:
            return self.cost("fdiv_instr")
        if op_name.startswith("math.") and op_name not in CHEAP_MATH_OPS:
            return self.transcendental_instr
        return self.op_instr

    def body_instructions(self, body_ops: dict[str, int]) -> float:
        """Instructions of ``LoopNest.body_ops``: sum of count x cost (one invocation)."""
        return math.fsum(count * self.op_instructions(name) for name, count in body_ops.items())

    def with_cores(self, cores: int) -> PimSpec:
        """The same machine with ``cores`` PIM cores (the paper sweeps 32, 64, 128)."""
        return dataclasses.replace(self, cores=cores)

    def to_file_units(self) -> dict[str, float | int | str]:
        """The spec as a file gives it; an unset value (None) is left out."""
        values: dict[str, float | int | str] = {
            key: (getattr(self, field) if integral else getattr(self, field) / scale)
            for key, (field, scale, integral) in PIM_KEYS.items()
            if getattr(self, field) is not None
        }
        if self.memory is not None:
            values["memory"] = self.memory
        return values

    def memory_text(self) -> str:
        """The memory architecture in words, with the values its accounting uses."""
        if self.memory == SHARED:
            assert self.host_cache is not None  # _check_memory guarantees it
            return f"shared (host caches {self.host_cache / 2**20:g} MiB)"
        if self.memory == PARTITIONED:
            assert self.link_to_pim_bandwidth is not None
            assert self.link_to_host_bandwidth is not None
            bank = (
                ""
                if self.bank_capacity_per_core is None
                else f", {self.bank_capacity_per_core / 2**20:g} MiB per core's bank"
            )
            return (
                f"partitioned (link {self.link_to_pim_bandwidth / 1e9:g} GB/s to PIM,"
                f" {self.link_to_host_bandwidth / 1e9:g} GB/s back{bank})"
            )
        return "not stated"


@dataclass(frozen=True)
class PimHardware:
    name: str
    description: str
    host: HostSpec
    pim: PimSpec
    source: str  # preset name or file path

    def describe(self) -> str:
        p = self.pim
        return (
            f"{self.name}: {p.cores} PIM cores at {p.clock / 1e9:g} GHz (issue {p.issue_width}),"
            f" T_ctx {p.t_ctx * 1e6:g} us, T_sw {p.t_sw * 1e6:g} us,"
            f" B_cpu {p.host_dram_bandwidth / 1e9:g} GB/s (theta {p.theta / 1e9:.3g} GB/s),"
            f" sigma {p.sigma:g}, B_rd {p.read_bandwidth / 1e9:g} GB/s,"
            f" B_wb {p.writeback_bandwidth / 1e9:g} GB/s; T_pim model: bank"
            f" {p.bank_bandwidth_per_core / 1e9:g} GB/s/core, sync"
            f" {p.t_sync_per_core * 1e9:g} ns/core; memory: {p.memory_text()}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "host": self.host.to_json(),
            "pim": self.pim.to_file_units(),
        }


#: The PIM machine used when none is named (the paper's Table 2 platform).
DEFAULT_PIM_PRESET = "pim-icelake"


def pim_preset_names() -> list[str]:
    return preset_names(pim=True)


def load_pim_hardware(name_or_path: str | Path = DEFAULT_PIM_PRESET) -> PimHardware:
    """Load a PIM preset by name, or a TOML file by path."""
    return load_description(
        name_or_path, presets=pim_preset_names(), what="PIM hardware", device="pim",
        build=description_builder(PimHardware, "pim", pim_spec_from_table),
    )  # fmt: skip


def with_pim_overrides(hw: PimHardware, **pim_values: float | int | None) -> PimHardware:
    """Apply overrides given in file units (cores=64, t_sw_us=...); None means keep."""
    values = {k: v for k, v in pim_values.items() if v is not None}
    if not values:
        return hw
    raw = hw.pim.to_file_units() | values
    return dataclasses.replace(hw, pim=pim_spec_from_table(raw, "command-line option"))


def pim_spec_from_table(table: Mapping[str, Any], source: str) -> PimSpec:
    """A validated PimSpec from a ``[pim]`` table in file units (``clock_ghz``, ``t_sw_us``
    ...), as in a hardware file or the ``hardware.pim`` of a result document.

    Every key of :data:`PIM_KEYS` is required except the later-added optional ones; an
    unknown, missing or invalid key raises a one-line PlacementError starting with
    ``source`` (a file path, or whatever names where the table came from).
    """
    table = dict(table)
    memory = table.pop("memory", None)
    if memory is not None and memory not in MEMORY_ARCHITECTURES:
        raise PlacementError(
            f"{source}: 'pim.memory' must be one of {', '.join(MEMORY_ARCHITECTURES)}"
            f" (how the host and the PIM cores reach memory), got {memory!r}"
        )
    fields = spec_fields(table, PIM_KEYS, source, "pim", _OPTIONAL_KEYS)
    for key in _MEMORY_KEYS:  # absent: unset, not the dataclass default
        fields.setdefault(PIM_KEYS[key][0], None)
    try:
        return PimSpec(**fields, memory=memory)
    except PlacementError as exc:  # relations between keys: name the file, not PimSpec
        raise PlacementError(str(exc).replace("PimSpec", source, 1)) from None


def _check_memory(spec: PimSpec, source: str) -> None:
    """The keys the memory architecture needs are given, the other architecture's are not."""
    if spec.memory is not None and spec.memory not in MEMORY_ARCHITECTURES:
        raise PlacementError(
            f"{source}: 'pim.memory' must be one of {', '.join(MEMORY_ARCHITECTURES)},"
            f" got {spec.memory!r}"
        )
    needed = _NEEDED_BY.get(spec.memory or "", ())
    for key in needed:
        if getattr(spec, PIM_KEYS[key][0]) is None:
            what = {
                "host_cache_mib": "the host's cache size, which bounds the dirty data written"
                " back before a PIM segment",
                "link_to_pim_gbps": "the host-to-PIM link bandwidth operands cross",
                "link_to_host_gbps": "the PIM-to-host link bandwidth results cross",
            }[key]
            raise PlacementError(
                f"{source}: 'pim.memory = \"{spec.memory}\"' needs 'pim.{key}' ({what})"
            )
    allowed = set(_NEEDED_BY.get(spec.memory or "", ()))
    if spec.memory == PARTITIONED:
        allowed.add("bank_mib_per_core")
    for key in sorted(_MEMORY_KEYS - allowed):
        if getattr(spec, PIM_KEYS[key][0]) is not None:
            kind = f"'pim.memory = \"{spec.memory}\"'" if spec.memory else "no 'pim.memory'"
            raise PlacementError(f"{source}: 'pim.{key}' does not apply with {kind}")


def _check_relations(spec: PimSpec, source: str) -> None:
    if spec.sigma > 1:
        raise PlacementError(
            f"{source}: 'pim.sigma' is a fraction of backend cycles, at most 1, got {spec.sigma!r}"
        )
    if spec.instr_per_iter < spec.i_min:
        # Otherwise the analytical T_pim could fall below C1's lower bound.
        raise PlacementError(
            f"{source}: 'pim.instr_per_iter' ({spec.instr_per_iter:g}) must be at least"
            f" 'pim.i_min' ({spec.i_min:g})"
        )
