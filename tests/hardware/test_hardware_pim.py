"""PIM hardware presets and files: the paper's Ice Lake machine, overrides in file units, the
instruction cost table, and one clear line for every bad value."""

import argparse
import dataclasses
import sys
from pathlib import Path

import pytest
from pim_oracles import nest

from placement.devices.pim import t_pim_min
from placement.errors import PlacementError
from placement.hardware.base import preset_names
from placement.hardware.pim import PimSpec, load_pim_hardware, pim_preset_names, with_pim_overrides

if sys.version_info >= (3, 11):
    import tomllib
else:  # the package's own dependency on 3.10
    import tomli as tomllib

pytestmark = pytest.mark.unit

SPEC = PimSpec()
PRESETS = Path(__file__).parents[2] / "placement/hardware/presets"


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
    assert p.memory == "shared" and p.host_cache == pytest.approx(43.3 * 2**20)
    for f in dataclasses.fields(PimSpec):  # dataclass defaults are the preset
        following = ("mul_instr", "fadd_instr", "fmul_instr", "fdiv_instr")
        if f.name in following and getattr(SPEC, f.name) is None:
            assert p.cost(f.name) == SPEC.cost(f.name), f.name  # follows op/div_instr
        elif isinstance(getattr(SPEC, f.name), float):
            assert getattr(p, f.name) == pytest.approx(getattr(SPEC, f.name)), f.name
        else:
            assert getattr(p, f.name) == getattr(SPEC, f.name), f.name


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
    assert spec.body_instructions(body) == 3 * 2 + 2 * 10 + 100  # float costs follow


def test_float_costs_of_a_core_without_fpu():
    spec = dataclasses.replace(SPEC, fadd_instr=60, fmul_instr=180, fdiv_instr=1000)
    cost = spec.op_instructions
    for op in ("arith.addf", "arith.subf", "arith.cmpf", "arith.maximumf", "arith.sitofp",
               "arith.truncf", "math.floor"):  # fmt: skip
        assert cost(op) == 60, op
    assert cost("arith.mulf") == 180
    assert cost("math.fma") == 180 + 60 - 1  # a multiply and an add in one issue slot
    assert cost("arith.divf") == cost("arith.remf") == 1000
    assert cost("arith.divsi") == 4  # integer division keeps div_instr
    for op in ("arith.addi", "arith.muli", "memref.load", "arith.negf", "math.absf",
               "arith.select"):  # fmt: skip
        assert cost(op) == 1, op  # mul_instr unset: an integer multiply follows op_instr
    body = {"memref.load": 2, "memref.store": 1, "arith.mulf": 1}
    assert spec.body_instructions(body) == 3 + 180


def test_integer_multiply_cost_of_a_core_without_multiplier():
    spec = dataclasses.replace(SPEC, op_instr=2, mul_instr=30)
    cost = spec.op_instructions
    for op in ("arith.muli", "arith.mulsi_extended", "arith.mului_extended"):
        assert cost(op) == 30, op
    assert cost("arith.addi") == cost("arith.mulf") == 2  # float multiply follows op_instr
    assert spec.body_instructions({"arith.muli": 3, "arith.addi": 3}) == 3 * 30 + 3 * 2
    with pytest.raises(PlacementError, match="mul_instr"):
        dataclasses.replace(SPEC, mul_instr=-1)


def test_upmem_preset_from_published_characteristics():
    hw = load_pim_hardware("pim-upmem")
    p = hw.pim
    assert "pim-upmem" in pim_preset_names() and "pim-upmem" not in preset_names()
    assert p.cores == 64 and p.clock == pytest.approx(350e6)  # one rank; v1A DPU
    assert p.issue_width == 1
    assert (p.read_bandwidth, p.writeback_bandwidth) == (pytest.approx(6.68e9),
                                                         pytest.approx(4.74e9))  # fmt: skip
    assert p.bank_bandwidth_per_core == pytest.approx(0.628e9)
    # emulated float: every float op costs tens to hundreds of integer instructions
    assert 10 * p.op_instr < p.cost("fadd_instr") < p.cost("fmul_instr") < p.cost("fdiv_instr")
    assert p.transcendental_instr == 8 * p.fmul_instr + 8 * p.fadd_instr + 4
    # the preset names its sources: the paper, its authors' slides (the measured values),
    # the SDK docs, and labels what it could not find as assumptions
    text = (PRESETS / "pim-upmem.toml").read_text()
    for words in ("Gomez-Luna", "arXiv:2105.03814", "sdk.upmem.com", "Prim_Access22_Slides.pdf",
                  "[slides 20]", "[slides 25]", "[slides 30]", "assumption"):  # fmt: skip
        assert words in text, words
    # the measured rates behind the cost table (slide 25): 350 MHz / MOPS - 5 loop instructions
    for cost, mops in (("fadd_instr", 4.91), ("fmul_instr", 1.91), ("div_instr", 11.3),
                       ("fdiv_instr", 0.34), ("mul_instr", 10.3)):  # fmt: skip
        assert getattr(p, cost) == pytest.approx(350 / mops - 5, abs=0.5), cost
    # 32-bit integer multiply is emulated too [slides 26]: a multiply-heavy body costs it
    assert "[slides 26]" in text
    assert p.op_instructions("arith.muli") == p.mul_instr == 29
    assert p.op_instructions("arith.addi") == p.op_instr == 1
    assert p.instr_per_iter == pytest.approx(350 / 58.5, abs=0.05)  # the int32 add loop


def test_hbm_preset_from_published_characteristics():
    hw = load_pim_hardware("pim-hbm")
    p = hw.pim
    assert "pim-hbm" in pim_preset_names() and "pim-hbm" not in preset_names()
    # 128 PCUs (8 per pseudo channel x 16 pseudo channels), 16 FP16 lanes at 300 MHz
    assert (p.cores, p.issue_width, p.clock) == (128, 16, pytest.approx(0.3e9))
    assert p.bank_bandwidth_per_core == pytest.approx(16 * 2 * 0.3e9)  # one 256-bit access/cycle
    assert p.memory == "shared" and p.host_cache == pytest.approx(43.3 * 2**20)
    # the host side is the assumed Ice Lake host's, as pim-icelake
    icelake = load_pim_hardware("pim-icelake").pim
    for field in ("host_dram_bandwidth", "theta_ratio", "sigma", "cache_line", "read_bandwidth",
                  "writeback_bandwidth", "host_cache", "t_sw", "t_ctx", "i_min"):  # fmt: skip
        assert getattr(p, field) == getattr(icelake, field), field
    # an FP16 add/multiply/MAC unit: one slot each; the MAC (math.fma) too
    for op in ("arith.addf", "arith.mulf", "math.fma", "arith.maximumf", "memref.load"):
        assert p.op_instructions(op) == 1, op
    # what its ISA lacks is priced below one host core's rate: 128 x 16 x 0.3 GHz / cost
    for op in ("arith.divf", "math.exp", "math.tanh", "math.erf", "math.sqrt"):
        assert p.cores * p.issue_width * p.clock / p.op_instructions(op) < 1e8, op
    text = (PRESETS / "pim-hbm.toml").read_text()
    for words in ("ISSCC 2021", "SAITPublic/PIMSimulator", "300MHz", "assumption", "GPU host"):
        assert words in text, words


@pytest.mark.parametrize("name", pim_preset_names())
def test_every_pim_preset_loads_and_describes_itself(name, capsys):
    hw = load_pim_hardware(name)
    assert hw.name == name and hw.source == name
    assert hw.description.strip() and hw.host.name.strip()
    assert hw.pim.memory in ("shared", "partitioned")  # every preset states its architecture
    described = hw.describe()
    assert described.startswith(f"{name}: ") and hw.pim.memory_text() in described
    # `placement presets` lists it with its description and its constants
    from placement.cli import presets

    assert presets.run(argparse.Namespace()) == 0
    out = capsys.readouterr().out
    assert f"{name}  (--target pim" in out
    assert hw.description in out and described in out


def test_no_constant_is_recalled_from_memory():
    files = [*sorted(PRESETS.glob("*.toml")), PRESETS.parent / "pim.py"]
    assert len(files) > 3
    for path in files:
        assert "recalled" not in path.read_text().lower(), path.name


@pytest.mark.parametrize("name", pim_preset_names())
def test_every_pim_constant_names_its_source(name):
    # Each [pim] key carries a comment that cites a source or says "assumption": on its
    # line and the indented comment lines continuing it, or in the comment block right above.
    lines = (PRESETS / f"{name}.toml").read_text().splitlines()
    start = lines.index("[pim]")
    keys = tomllib.loads("\n".join(lines[start:]))["pim"]
    assert set(keys) >= {"cores", "clock_ghz", "bank_gbps_per_core", "memory"}

    def continuation(line: str) -> bool:
        return line.startswith(" ") and line.lstrip().startswith("#")

    cited = ("Section", "Table", "[", "Torch-PIM", "pim-icelake")
    for key in keys:
        (at,) = [i for i in range(start, len(lines)) if lines[i].split("=")[0].strip() == key]
        comment = lines[at].partition("#")[2]
        below = at + 1
        while below < len(lines) and continuation(lines[below]):
            comment += lines[below]
            below += 1
        above = at - 1
        while lines[above].startswith("#"):  # the comment block right above it
            comment = lines[above] + comment
            above -= 1
        sourced = any(word in comment for word in cited) or "assumption" in comment.lower()
        assert sourced, (name, key, comment)


def test_float_costs_follow_in_old_files(tmp_path):
    # A file from before the float keys: its op/div costs still price the float ops.
    values = SPEC.to_file_units() | {"op_instr": 3, "div_instr": 9}
    assert "fadd_instr" not in values  # unset costs are not written
    lines = "\n".join(f"{k} = {v!r}" for k, v in values.items())
    path = tmp_path / "mine.toml"
    path.write_text(f'[host]\nname = "h"\narch = "x86_64"\n[pim]\n{lines}\n')
    spec = load_pim_hardware(path).pim
    assert spec.op_instructions("arith.addf") == spec.op_instructions("arith.mulf") == 3
    assert spec.op_instructions("arith.divf") == 9


def test_old_pim_file_without_cost_table_keys(tmp_path):
    # A complete file written before the cost table existed still loads, with the defaults.
    values = SPEC.to_file_units()
    for key in ("op_instr", "div_instr", "transcendental_instr"):
        del values[key]
    assert not {"mul_instr", "fadd_instr", "fmul_instr", "fdiv_instr"} & set(values)  # follow
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
