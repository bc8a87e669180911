"""The energy model's keys in hardware files: a group given whole or not at all, zero
allowed (a term left out), every value checked, kept through base = and overrides."""

from __future__ import annotations

import pytest

from placement.errors import PlacementError
from placement.hardware.cim import CIM_ENERGY_KEYS, load_hardware, with_overrides
from placement.hardware.pim import load_pim_hardware


@pytest.mark.unit
def test_presets_carry_the_whole_group_and_a_host_power():
    for name in ("arm-a72", "x86-ryzen", "arm-a72-model", "x86-ryzen-model"):
        hw = load_hardware(name)
        assert hw.cim.energy is not None and hw.host.active_power is not None, name
        assert set(CIM_ENERGY_KEYS) <= set(hw.to_json()["cim"])
        assert hw.to_json()["host"]["active_power_w"] == hw.host.active_power


@pytest.mark.unit
def test_a_user_file_may_change_or_zero_one_constant(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('base = "arm-a72"\n[cim]\np_static_mw_per_crossbar = 0\ne_adc_pj = 3.2\n')
    hw = load_hardware(path)
    assert hw.cim.energy.p_static == 0.0 and hw.cim.energy.e_adc == pytest.approx(3.2e-12)
    assert with_overrides(hw, e_bus_pj_per_byte=16.25).cim.energy.e_bus == pytest.approx(16.25e-12)
    assert load_hardware(path).to_json() == hw.to_json()


@pytest.mark.unit
def test_without_base_the_group_is_whole_or_absent(tmp_path):
    plain = load_hardware("arm-a72").to_json()
    cim = {k: v for k, v in plain["cim"].items() if k not in CIM_ENERGY_KEYS}
    lines = ['name = "x"', "[host]", 'name = "h"', 'arch = "x86_64"', "[cim]"]
    lines += [f"{k} = {v}" for k, v in cim.items()]
    path = tmp_path / "plain.toml"
    path.write_text("\n".join(lines) + "\n")
    hw = load_hardware(path)
    assert hw.cim.energy is None and hw.host.active_power is None
    path.write_text("\n".join([*lines, "e_adc_pj = 1.0"]) + "\n")
    with pytest.raises(PlacementError, match="missing key 'cim.e_dac_pj'.*all given or none"):
        load_hardware(path)


@pytest.mark.unit
@pytest.mark.parametrize("key, value, words", [
    ("e_adc_pj", -1, "non-negative"), ("cell_bits", 1.5, "whole number"),
    ("dac_bits", 0, "positive"), ("e_bus_pj_per_byte", '"x"', "must be a number"),
])  # fmt: skip
def test_bad_energy_values_are_one_line(tmp_path, key, value, words):
    path = tmp_path / "bad.toml"
    path.write_text(f'base = "arm-a72"\n[cim]\n{key} = {value}\n')
    with pytest.raises(PlacementError, match=words):
        load_hardware(path)


@pytest.mark.unit
def test_the_host_power_is_checked_and_is_for_cim_machines(tmp_path):
    path = tmp_path / "h.toml"
    path.write_text('base = "arm-a72"\n[host]\nactive_power_w = 0\n')
    with pytest.raises(PlacementError, match="must be positive"):
        load_hardware(path)
    pim = tmp_path / "pim.toml"
    pim.write_text('base = "pim-icelake"\n[host]\nactive_power_w = 5\n')
    with pytest.raises(PlacementError, match="for CIM hardware"):
        load_pim_hardware(pim)
