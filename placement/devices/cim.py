"""Analytical CIM accelerator and bus model (CIM paper, Section IV-A2/3, Eqs. 1-4).

The accelerator is PUMA-like: weights are stationary in ``M x N`` RRAM
crossbars; an operator's weight matrix (after im2col) occupies Eq. 1 crossbars,
all of which work in parallel, so its latency is load + ``N_mvm`` MVMs + store,
independent of the crossbar count (Eqs. 2-3). Data crossing between host and
accelerator pays the shared bus (Eq. 4). All times in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from placement.hardware.cim import CimSpec


@dataclass(frozen=True)
class CimLatency:
    load: float
    mvm: float
    store: float

    @property
    def total(self) -> float:
        return self.load + self.mvm + self.store  # Eq. 2


def crossbars_needed(rows: int, cols: int, spec: CimSpec) -> int:
    """Eq. 1: ceil(M_v / M) * ceil(N_v / N)."""
    return math.ceil(rows / spec.crossbar_rows) * math.ceil(cols / spec.crossbar_cols)


def accelerator_latency(n_mvm: int, n_in: int, n_out: int, spec: CimSpec) -> CimLatency:
    """Eqs. 2-3: T_acc = b*N_in/B_cim + N_mvm*T_mvm + b*N_out/B_cim."""
    return CimLatency(
        load=spec.elem_bytes * n_in / spec.internal_bandwidth,
        mvm=n_mvm * spec.t_mvm,
        store=spec.elem_bytes * n_out / spec.internal_bandwidth,
    )


def transfer_latency(n_out_producer: int, spec: CimSpec) -> float:
    """Eq. 4: the producer's whole output crosses the shared bus once."""
    return spec.elem_bytes * n_out_producer / spec.bus_bandwidth
