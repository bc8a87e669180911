"""PIM hardware presets and the analytical device model: C1 bound, T_pim, Eq. 8, Eq. 9."""

import dataclasses
import random

import pytest
from pim_oracles import nest, operand

from placement.devices.pim import (
    HybridTime,
    hybrid_time,
    speedup,
    t_copy,
    t_pim,
    t_pim_breakdown,
    t_pim_min,
)
from placement.errors import PlacementError
from placement.hardware import preset_names
from placement.pim_hardware import PimSpec, load_pim_hardware, pim_preset_names, with_pim_overrides

SPEC = PimSpec()


# --- hardware --------------------------------------------------------------------------


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
        ("frobs", 1, "unknown key 'pim.frobs'"),
    ],
)
def test_bad_values_name_the_key(tmp_path, key, value, words):
    path = tmp_path / "bad.toml"
    path.write_text(f'base = "pim-icelake"\n[pim]\n{key} = {value}\n')
    with pytest.raises(PlacementError, match=words) as err:
        load_pim_hardware(path)
    assert "\n" not in str(err.value)


def test_bad_spec_values_in_code():
    with pytest.raises(PlacementError, match="'pim.cores' must be positive"):
        PimSpec(cores=0)
    with pytest.raises(PlacementError, match="'pim.t_ctx_us' must be positive"):
        PimSpec(t_ctx=-1e-6)
    with pytest.raises(PlacementError, match="n_cores"):
        t_pim_min(nest(0, ()), SPEC, 0)
    with pytest.raises(PlacementError, match="neither a preset"):
        load_pim_hardware("no-such-machine")


# --- C1 bound and T_pim -----------------------------------------------------------------


def test_c1_lower_bound_hand_computed():
    n = nest(0, (), n_iter=1024, n_total=1 << 20)
    assert t_pim_min(n, SPEC) == pytest.approx(2**20 / (32 * 1e9))  # 32.768 us
    assert t_pim_min(n, SPEC, 128) == pytest.approx(2**20 / (128 * 1e9))
    looped = nest(0, (), n_iter=1024, n_total=1 << 20, trip_count=4)
    assert t_pim_min(looped, SPEC) == pytest.approx(4 * 2**20 / 32e9)  # all invocations
    assert t_pim_min(n, dataclasses.replace(SPEC, issue_width=2)) == pytest.approx(2**20 / 64e9)


def test_t_pim_hand_computed():
    # 100 parallel x 10 inner iterations; one 4000 B operand read and written in place.
    n = nest(0, (operand("a", 4000, read=True, written=True),), n_iter=100, n_total=1000)
    b = t_pim_breakdown(n, SPEC)
    assert b.cores_used == 32
    assert b.compute == pytest.approx(4 * 10 * 4 / 1e9)  # ceil(100/32)=4 x 10 x 4 instr
    assert b.memory == pytest.approx(8000 / (32 * 8e9))
    assert b.sync == pytest.approx(32 * 10e-9)
    assert t_pim(n, SPEC) == pytest.approx(160e-9 + 31.25e-9 + 320e-9)
    # fewer parallel iterations than cores: only 8 cores work
    small = nest(0, (), n_iter=8, n_total=80)
    assert t_pim_breakdown(small, SPEC).cores_used == 8
    assert t_pim_breakdown(small, SPEC).compute == pytest.approx(10 * 4e-9)
    # per-nest instruction estimate
    assert t_pim_breakdown(n, SPEC, instr_per_iter=1).compute == pytest.approx(40e-9)
    with pytest.raises(PlacementError, match="at least I_min"):
        t_pim(n, SPEC, instr_per_iter=0.5)
    # trip count multiplies everything
    looped = dataclasses.replace(n, trip_count=3)
    assert t_pim(looped, SPEC) == pytest.approx(3 * t_pim(n, SPEC))


def test_t_pim_never_below_the_c1_bound():
    rng = random.Random(7)
    for _ in range(300):
        n_iter = rng.randint(1, 5000)
        n = nest(0, (operand("a", rng.randint(1, 10**6), read=True, written=False),),
                 n_iter=n_iter, n_total=n_iter * rng.randint(1, 50), trip_count=rng.randint(1, 4))
        for cores in (32, 64, 128, 7):
            assert t_pim(n, SPEC, cores) >= t_pim_min(n, SPEC, cores)


def test_small_nests_get_slower_with_more_cores():
    # The synchronization term: the paper's layernorm regression from 64 to 128 cores.
    small = nest(0, (operand("a", 4096, read=True, written=True),), n_iter=4096, n_total=4096)
    big = nest(0, (operand("a", 1 << 24, read=True, written=True),), n_iter=1 << 22)
    assert t_pim(small, SPEC, 128) > t_pim(small, SPEC, 64)
    assert t_pim(big, SPEC, 32) > t_pim(big, SPEC, 64) > t_pim(big, SPEC, 128)


# --- Eq. 8 and Eq. 9 --------------------------------------------------------------------


def test_eq8_hand_computed():
    a = nest(0, (operand("x", 16384, read=True, written=False),
                 operand("y", 16384, read=False, written=True)))
    b = nest(1, (operand("y", 16384, read=True, written=True),), trip_count=2)
    spec = dataclasses.replace(SPEC, read_bandwidth=1e9, writeback_bandwidth=2e9)
    # fetch = 16384 + 2*16384, flush = 16384 + 2*16384
    assert t_copy([a, b], spec) == pytest.approx(49152 / 1e9 + 49152 / 2e9)
    assert t_copy([], spec) == 0.0


def test_eq9_hand_computed():
    h = hybrid_time(10e-6, 4e-6, 3e-6, 4, SPEC)
    assert h == HybridTime(host=10e-6, pim=4e-6, copy=3e-6, n_region=4, t_sw=2e-6)
    assert h.switch == pytest.approx(8e-6)
    assert h.total == pytest.approx(25e-6)
    assert speedup(50e-6, h.total) == pytest.approx(2.0)
    assert speedup(0.0, 0.0) == 1.0
