"""Presets, user files and overrides: units converted once, bad values rejected by key."""

import pytest

from placement.errors import PlacementError
from placement.hardware.base import default_preset_for, preset_names
from placement.hardware.cim import load_hardware, with_overrides

pytestmark = pytest.mark.unit


def test_paper_presets():
    assert set(preset_names()) >= {"arm-a72", "x86-ryzen"}
    arm, x86 = load_hardware("arm-a72"), load_hardware("x86-ryzen")
    assert arm.cim.bus_bandwidth == pytest.approx(10.24e9)
    assert x86.cim.bus_bandwidth == pytest.approx(20.48e9)
    for hw in (arm, x86):
        assert (hw.cim.crossbar_rows, hw.cim.crossbar_cols) == (256, 256)
        assert hw.cim.internal_bandwidth == hw.cim.bus_bandwidth
        assert hw.cim.elem_bytes == 1
        assert hw.cim.t_mvm == pytest.approx(50e-9)
    assert arm.host.arch == "aarch64" and x86.host.arch == "x86_64"


def test_default_preset_matches_the_host_architecture():
    assert default_preset_for("x86_64") == "x86-ryzen"
    assert default_preset_for("aarch64") == "arm-a72"
    assert default_preset_for("arm64") == "arm-a72"


def test_user_file_based_on_a_preset(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('base = "arm-a72"\n[cim]\ncrossbars = 64\nt_mvm_ns = 200\n')
    hw = load_hardware(path)
    assert hw.name == "mine"
    assert hw.cim.crossbars == 64
    assert hw.cim.t_mvm == pytest.approx(200e-9)
    assert hw.cim.bus_bandwidth == pytest.approx(10.24e9)  # inherited
    assert hw.host.arch == "aarch64"


def test_overrides_in_file_units():
    hw = with_overrides(load_hardware("x86-ryzen"), crossbars=25, t_mvm_ns=1000, bus_gbps=1.5)
    assert hw.cim.crossbars == 25
    assert hw.cim.t_mvm == pytest.approx(1e-6)
    assert hw.cim.bus_bandwidth == pytest.approx(1.5e9)
    assert with_overrides(hw) is hw


FULL = """
[host]
name = "h"
arch = "x86_64"
[cim]
crossbars = 10
crossbar_rows = 256
crossbar_cols = 256
t_mvm_ns = 50
bus_gbps = 1
internal_gbps = 1
elem_bytes = 1
"""


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("t_mvm_ns = 50\n", ""), "missing key 'cim.t_mvm_ns'"),
        (("bus_gbps = 1\n", "bus_gbps = -2\n"), "'cim.bus_gbps' must be positive"),
        (("crossbars = 10\n", "crossbars = 0\n"), "'cim.crossbars' must be positive"),
        (("crossbars = 10\n", "crossbars = 2.5\n"), "'cim.crossbars' must be a whole number"),
        (("elem_bytes = 1\n", 'elem_bytes = "one"\n'), "'cim.elem_bytes' must be a number"),
        (("elem_bytes = 1\n", "elem_bytes = 1\nbogus = 3\n"), "unknown key 'cim.bogus'"),
        (('arch = "x86_64"\n', ""), "missing or empty key 'host.arch'"),
        (("[cim]", "[cim"), "not valid TOML"),
    ],
)
def test_bad_hardware_files_name_the_key(tmp_path, edit, message):
    path = tmp_path / "hw.toml"
    path.write_text(FULL.replace(*edit))
    with pytest.raises(PlacementError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_hardware(path)


def test_full_file_loads(tmp_path):
    path = tmp_path / "hw.toml"
    path.write_text(FULL)
    assert load_hardware(path).cim.crossbars == 10


def test_unknown_preset_or_missing_file():
    with pytest.raises(PlacementError, match="neither a preset"):
        load_hardware("riscv-potato")


def test_bad_override():
    with pytest.raises(PlacementError, match="crossbars' must be positive"):
        with_overrides(load_hardware("arm-a72"), crossbars=0)
