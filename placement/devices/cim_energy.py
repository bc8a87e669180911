"""Analytical energy model of the CPU + CIM machine: a model beside the paper's Eqs. 1-4.

The CIM paper models latency only; this module adds the energy of one inference on the
same machine, from the same operator data, with constants from published CIM designs
(``[cim]`` energy keys and ``[host] active_power_w`` of the hardware files, each with its
source; :class:`~placement.hardware.cim.CimEnergySpec`). All energies in joules.

Accelerator, per operator ``v`` with weight matrix ``M_v x N_v`` after im2col (``g``
groups mapped block-diagonally, :mod:`placement.graph`) on crossbars of ``M x N`` cells
(Eq. 1). An int8 input is applied bit-serially, ``k_in = ceil(8 b_elem / dac_bits)``
slices per MVM, and a weight spans ``k_w = ceil(8 b_elem / cell_bits)`` cells (the
weights are assumed to have the activations' precision, as in the paper's int8 networks).
Per MVM, every crossbar receives its slice of the input and produces its slice of the
output, so:

* E1 ``E_mvm,v = N_mvm,v * k_in * (e_dac * N_v * ceil(M_v / M)      DAC conversions
  + e_adc * k_w * M_v * ceil(N_v / N)                               ADC conversions
  + e_cell * k_w * M_v * N_v / g)``                                  cell reads
* E2 ``E_internal,v = e_internal * b_elem * (N_in,v + N_out,v)``: the loads and stores of
  Eq. 3 over the internal bus;
* E3 ``E_transfer,(u,v) = e_bus * b_elem * N_out,u``: the transfer of Eq. 4, paid where
  ``u`` and ``v`` run on different devices;
* E4 ``P_static = C * p_static``: every crossbar's leakage, drawn over the makespan.

Host: E5 ``E_host,v = P_host * T_host,v``, the host core's power above idle while it runs
an operator (``[host] active_power_w``, a published figure: an estimate) times its
latency (measured, or the host model's). A host profile measured where the machine
exposes RAPL energy counters carries a measured power (:mod:`placement.profiling.rapl`),
which then replaces the figure.

Energy of a placement: the sum of E5 over host operators, E1 + E2 over CIM operators, E3
over edges between devices and ``P_static`` times the makespan (the objective family of
:mod:`placement.models.cim_makespan.objectives`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from placement.hardware.cim import CimEnergySpec, CimSpec


@dataclass(frozen=True)
class OperatorEnergy:
    """E1 and E2 of one operator on the accelerator, joules."""

    mvm: float  # crossbar reads with their DAC and ADC conversions (E1)
    internal: float  # loads and stores over the internal bus (E2)

    @property
    def total(self) -> float:
        return self.mvm + self.internal


def bit_slices(bits: int, slice_bits: int) -> int:
    """How many slices of ``slice_bits`` hold ``bits`` bits."""
    return math.ceil(bits / slice_bits)


def accelerator_energy(
    rows: int, cols: int, groups: int, n_mvm: int, n_in: int, n_out: int,
    spec: CimSpec, energy: CimEnergySpec,
) -> OperatorEnergy:  # fmt: skip
    """E1 and E2 of an operator with weight matrix ``rows x cols`` (M_v x N_v, ``groups``
    block-diagonal groups), ``n_mvm`` MVMs and ``n_in``/``n_out`` elements loaded/stored."""
    bits = 8 * spec.elem_bytes
    k_in = bit_slices(bits, energy.dac_bits)
    k_w = bit_slices(bits, energy.cell_bits)
    dac = cols * math.ceil(rows / spec.crossbar_rows)
    adc = k_w * rows * math.ceil(cols / spec.crossbar_cols)
    cells = k_w * rows * cols // groups
    per_mvm = k_in * (energy.e_dac * dac + energy.e_adc * adc + energy.e_cell * cells)
    internal = energy.e_internal * spec.elem_bytes * (n_in + n_out)
    return OperatorEnergy(mvm=n_mvm * per_mvm, internal=internal)


def transfer_energy(n_out_producer: int, spec: CimSpec, energy: CimEnergySpec) -> float:
    """E3: the producer's whole output over the shared bus once."""
    return energy.e_bus * spec.elem_bytes * n_out_producer


def static_power(spec: CimSpec, energy: CimEnergySpec) -> float:
    """E4: watts drawn by the accelerator's ``C`` crossbars, whether used or not."""
    return spec.crossbars * energy.p_static


def host_energy(t_host: float, active_power: float) -> float:
    """E5: a host operator's latency times the host core's power above idle."""
    return t_host * active_power
