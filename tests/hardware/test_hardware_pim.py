"""PIM hardware presets and files: the paper's Ice Lake machine, overrides in file units, the
instruction cost table, and one clear line for every bad value."""

import dataclasses

import pytest
from pim_oracles import nest

from placement.devices.pim import t_pim_min
from placement.errors import PlacementError
from placement.hardware.base import preset_names
from placement.hardware.pim import PimSpec, load_pim_hardware, pim_preset_names, with_pim_overrides

pytestmark = pytest.mark.unit

SPEC = PimSpec()


# --- presets, files, overrides --------------------------------------------------------


def test_icelake_preset_matches_the_paper():
    hw = load_pim_hardware("pim-icelake")
    p = hw.pim
    assert "pim-icelake" in pim_preset_names()
    assert "pim-icelake" not in preset_names()  # the CIM preset list is unchanged
    assert (p.cores, p.clock, p.issue_width, p.i_min) == (32, 1e9, 1, 1.0)
    assert p.t_sw == pytest.approx(2e-6) and p.t_ctx == pytest.approx(2e-6)
    assert p.theta == pytest.approx(0.12 * 16.754e9)  # 2.01 GB/s, the paper's 2.0 GB/s
    assert (p.sigma, p.cache_line) == (0.4, 64)
    assert p.read_bandwidth == pytest.approx(p.host_dram_bandwidth)
    assert hw.host.arch == "x86_64" and "6330" in hw.host.name
    for f in dataclasses.fields(PimSpec):  # dataclass defaults are the preset
        assert getattr(p, f.name) == pytest.approx(getattr(SPEC, f.name)), f.name


def test_core_sweep_and_overrides_in_file_units():
    hw = with_pim_overrides(load_pim_hardware(), cores=128, t_sw_us=5, read_gbps=10)
    assert hw.pim.cores == 128
    assert hw.pim.t_sw == pytest.approx(5e-6)
    assert hw.pim.read_bandwidth == pytest.approx(10e9)
    assert SPEC.with_cores(64).cores == 64


def test_user_file_based_on_the_preset(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('base = "pim-icelake"\n[pim]\ncores = 64\nhost_dram_gbps = 15\n')
    hw = load_pim_hardware(path)
    assert hw.name == "mine" and hw.pim.cores == 64
    assert hw.pim.theta == pytest.approx(1.8e9)
    assert hw.pim.sigma == 0.4  # inherited


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("cores", 0, "'pim.cores' must be positive"),
        ("cores", 2.5, "'pim.cores' must be a whole number"),
        ("clock_ghz", -1, "'pim.clock_ghz' must be positive"),
        ("t_sw_us", 0, "'pim.t_sw_us' must be positive"),
        ("read_gbps", 0, "'pim.read_gbps' must be positive"),
        ("sigma", 1.5, "'pim.sigma'"),
        ("instr_per_iter", 0.5, "'pim.instr_per_iter'"),
        ("op_instr", 0, "'pim.op_instr' must be positive"),
        ("div_instr", -4, "'pim.div_instr' must be positive"),
        ("transcendental_instr", 0, "'pim.transcendental_instr' must be positive"),
        ("transcendental_instr", '"lots"', "'pim.transcendental_instr' must be a number"),
        ("frobs", 1, "unknown key 'pim.frobs'"),
    ],
)
def test_bad_values_name_the_key(tmp_path, key, value, words):
    path = tmp_path / "bad.toml"
    path.write_text(f'base = "pim-icelake"\n[pim]\n{key} = {value}\n')
    with pytest.raises(PlacementError, match=words) as err:
        load_pim_hardware(path)
    assert "\n" not in str(err.value)


def test_instruction_cost_table():
    hw = load_pim_hardware("pim-icelake")
    assert (hw.pim.op_instr, hw.pim.div_instr, hw.pim.transcendental_instr) == (1, 4, 20)
    cost = SPEC.op_instructions
    assert [cost(k) for k in ("memref.load", "memref.store", "arith.addf", "arith.select",
                              "arith.maximumf", "arith.cmpf")] == [1] * 6  # fmt: skip
    assert [cost(k) for k in ("arith.divf", "arith.divsi", "arith.remf")] == [4] * 3
    for op in ("math.exp", "math.tanh", "math.erf", "math.log", "math.sqrt", "math.powf"):
        assert cost(op) == 20, op
    assert cost("math.absf") == cost("math.fma") == cost("math.floor") == 1
    spec = dataclasses.replace(SPEC, op_instr=2, div_instr=10, transcendental_instr=100)
    body = {"memref.load": 3, "arith.divf": 2, "math.tanh": 1}
    assert spec.body_instructions(body) == 3 * 2 + 2 * 10 + 100


def test_old_pim_file_without_cost_table_keys(tmp_path):
    # A complete file written before the cost table existed still loads, with the defaults.
    values = SPEC.to_file_units()
    for key in ("op_instr", "div_instr", "transcendental_instr"):
        del values[key]
    lines = "\n".join(f"{k} = {v!r}" for k, v in values.items())
    path = tmp_path / "old.toml"
    path.write_text(f'[host]\nname = "h"\narch = "x86_64"\n[pim]\n{lines}\n')
    loaded = load_pim_hardware(path).pim
    for f in dataclasses.fields(PimSpec):
        assert getattr(loaded, f.name) == pytest.approx(getattr(SPEC, f.name)), f.name
    path.write_text(f'[host]\nname = "h"\narch = "x86_64"\n[pim]\n{lines}\n'
                    "transcendental_instr = 50\n")  # fmt: skip
    assert load_pim_hardware(path).pim.transcendental_instr == 50
    hw = with_pim_overrides(load_pim_hardware(), transcendental_instr=40, div_instr=8)
    assert (hw.pim.transcendental_instr, hw.pim.div_instr) == (40, 8)


def test_bad_spec_values_in_code():
    with pytest.raises(PlacementError, match="'pim.cores' must be positive"):
        PimSpec(cores=0)
    with pytest.raises(PlacementError, match="'pim.t_ctx_us' must be positive"):
        PimSpec(t_ctx=-1e-6)
    with pytest.raises(PlacementError, match="n_cores"):
        t_pim_min(nest(0, ()), SPEC, 0)
    with pytest.raises(PlacementError, match="neither a preset"):
        load_pim_hardware("no-such-machine")
