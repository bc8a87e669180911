"""The energy model of the accelerator (placement.devices.cim_energy), by hand: conversions
counted per crossbar, bit-slices, block-diagonal groups, buses and static power."""

from __future__ import annotations

import dataclasses

import pytest

from placement.devices.cim_energy import (
    accelerator_energy,
    bit_slices,
    host_energy,
    static_power,
    transfer_energy,
)
from placement.hardware.cim import CimEnergySpec, load_hardware

ENERGY = CimEnergySpec(e_dac=1.0, e_adc=10.0, e_cell=0.5, dac_bits=1, cell_bits=2,
                       e_internal=3.0, e_bus=7.0, p_static=0.25)  # fmt: skip


@pytest.mark.unit
def test_one_full_crossbar_by_hand():
    spec = dataclasses.replace(load_hardware("arm-a72").cim, energy=ENERGY, crossbars=4)
    e = accelerator_energy(256, 256, 1, n_mvm=2, n_in=10, n_out=20, spec=spec, energy=ENERGY)
    # per MVM, 8 input bit-slices: 256 DAC conversions, 256 columns x 4 weight slices of ADC
    # conversions, 256 x 256 x 4 cell reads
    per_mvm = 8 * (256 * 1.0 + 4 * 256 * 10.0 + 4 * 256 * 256 * 0.5)
    assert e.mvm == pytest.approx(2 * per_mvm)
    assert e.internal == pytest.approx(3.0 * 1 * 30)
    assert transfer_energy(20, spec, ENERGY) == pytest.approx(140.0)
    assert static_power(spec, ENERGY) == pytest.approx(1.0)
    assert host_energy(2e-3, 0.88) == pytest.approx(1.76e-3)


@pytest.mark.unit
def test_tiles_and_groups():
    spec = dataclasses.replace(load_hardware("arm-a72").cim, energy=ENERGY)
    # 300 outputs x 600 inputs: 2 x 3 crossbars; every input reaches both output tiles,
    # every output is converted once per input tile
    e = accelerator_energy(300, 600, 1, 1, 0, 0, spec, ENERGY)
    assert e.mvm == pytest.approx(8 * (600 * 2 * 1.0 + 4 * 300 * 3 * 10.0 + 4 * 300 * 600 * 0.5))
    grouped = accelerator_energy(300, 600, 3, 1, 0, 0, spec, ENERGY)
    assert e.mvm - grouped.mvm == pytest.approx(8 * 4 * 300 * 600 * 0.5 * (1 - 1 / 3))
    assert bit_slices(8, 3) == 3 and bit_slices(16, 2) == 8


@pytest.mark.unit
def test_the_presets_energy_is_what_their_sources_give():
    """ISAAC's converter energies and PUMA's crossbar figures, as the presets quote them."""
    energy = load_hardware("arm-a72").cim.energy
    assert energy is not None
    assert energy.e_adc == pytest.approx(16e-3 / (1.2 * 8e9))  # 16 mW over 8 ADCs at 1.2 GS/s
    assert energy.e_dac == pytest.approx(0.41667e-12)
    assert energy.e_cell == pytest.approx(0.3e-3 * 128e-9 / (128 * 128))
    assert energy.e_internal == pytest.approx(20.45e-12 / 32 + 0.054e-12 * 8)
    assert energy.e_bus == pytest.approx(26e-12 / 16)
    assert energy.p_static == pytest.approx(0.2e-3 + 256 * 0.000390625e-3)
    assert load_hardware("x86-ryzen").cim.energy == energy  # the same accelerator
