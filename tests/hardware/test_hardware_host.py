"""The [host] table: where host latencies come from (measured or modelled), the host
model's constants, and the one host-mismatch check every command uses."""

import pytest

from placement.errors import PlacementError
from placement.hardware.base import HOST_MODEL_KEYS, preset_names
from placement.hardware.cim import load_hardware
from placement.hardware.hostcheck import arch_family, host_from_json, host_latency_source
from placement.hardware.pim import load_pim_hardware

pytestmark = pytest.mark.unit

MEASURED_X86 = {"machine": "x86_64", "cpu": "Intel(R) Xeon(R) Processor"}


def test_presets_carry_the_host_model_and_say_where_latencies_come_from():
    assert {"arm-a72-model", "x86-ryzen-model"} <= set(preset_names())
    for name in ("arm-a72", "x86-ryzen"):
        measured, modelled = load_hardware(name), load_hardware(f"{name}-model")
        assert measured.host.latency == "measured" and not measured.host.modelled
        assert modelled.host.latency == "model" and modelled.host.modelled
        assert modelled.host.model == measured.host.model is not None  # same constants
        assert (modelled.host.name, modelled.host.arch) == (measured.host.name, measured.host.arch)
        # the same CIM side (to the last bit or two: ``base =`` goes through file units)
        for field in ("crossbars", "crossbar_rows", "crossbar_cols", "t_mvm", "bus_bandwidth"):
            assert getattr(modelled.cim, field) == pytest.approx(getattr(measured.cim, field))
        assert "(estimate)" in modelled.describe() and "estimate" not in measured.describe()
    arm = load_hardware("arm-a72").host.model
    assert arm is not None
    assert arm.clock == pytest.approx(1.5e9)
    assert arm.fp32_macs_per_cycle == 4  # 8 fp32 FLOP/cycle
    x86 = load_hardware("x86-ryzen").host.model
    assert x86 is not None and x86.fp32_macs_per_cycle == 16  # 32 fp32 FLOP/cycle
    for spec in (arm, x86):
        for key, (field, _, fraction) in HOST_MODEL_KEYS.items():
            value = getattr(spec, field)
            assert value > 0 and (not fraction or value <= 1), key


def test_json_round_trip_and_identity():
    hw = load_hardware("arm-a72-model")
    doc = hw.host.to_json()
    assert doc["latency"] == "model" and doc["clock_ghz"] == pytest.approx(1.5)
    assert host_from_json(doc) == hw.host
    # measured latencies do not use the model's constants: they do not define the machine;
    # the host's power does (the energy model)
    assert load_hardware("arm-a72").host.identity() == {
        "name": "ARM Cortex-A72 (1 core)", "arch": "aarch64", "active_power_w": 0.88,
    }  # fmt: skip
    assert hw.host.identity() == doc
    # an older document: name and arch only, read as measured
    old = host_from_json({"name": "h", "arch": "x86_64"})
    assert old is not None and old.latency == "measured" and old.model is None


def test_a_user_file_switches_a_preset_to_modelled_latencies(tmp_path):
    path = tmp_path / "edge.toml"
    path.write_text('base = "arm-a72"\n[host]\nlatency = "model"\neff_dense_conv = 0.25\n')
    hw = load_hardware(path)
    assert hw.host.modelled
    assert hw.host.model is not None and hw.host.model.eff_dense_conv == 0.25
    assert hw.host.model.clock == pytest.approx(1.5e9)  # the rest inherited


CIM_TABLE = {"crossbars": 10, "crossbar_rows": 256, "crossbar_cols": 256, "t_mvm_ns": 50,
             "bus_gbps": 1, "internal_gbps": 1, "elem_bytes": 1}  # fmt: skip
FULL = """
[host]
name = "h"
arch = "x86_64"
latency = "model"
clock_ghz = 2
fp32_macs_per_cycle = 16
int8_macs_per_cycle = 64
memory_gbps = 10
overhead_us = 5
eff_dense_conv = 0.5
eff_grouped_conv = 0.1
eff_matmul = 0.5
eff_memory = 0.5
[cim]
""" + "".join(f"{key} = {value}\n" for key, value in CIM_TABLE.items())


def test_a_full_file_with_the_host_model(tmp_path):
    path = tmp_path / "hw.toml"
    path.write_text(FULL)
    hw = load_hardware(path)
    assert hw.host.modelled and hw.host.model is not None
    assert hw.host.model.memory_bandwidth == pytest.approx(10e9)
    assert hw.host.model.overhead == pytest.approx(5e-6)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('latency = "model"', 'latency = "measure"'),
         "'host.latency' must be \"measured\" (an ONNX Runtime profile) or \"model\""),
        (('latency = "model"', "latency = 1"), "'host.latency' must be \"measured\""),
        (("clock_ghz = 2\n", ""),
         "missing key 'host.clock_ghz' (host.latency = \"model\" needs the host model constants"),
        (('latency = "model"\n', 'latency = "measured"\n', "memory_gbps = 10\n", ""),
         "missing key 'host.memory_gbps' (the host model constants are all given or none"),
        (("eff_matmul = 0.5", "eff_matmul = 1.5"),
         "'host.eff_matmul' is a fraction of the peak, at most 1, got 1.5"),
        (("overhead_us = 5", "overhead_us = -1"), "'host.overhead_us' must be positive"),
        (("memory_gbps = 10", 'memory_gbps = "fast"'), "'host.memory_gbps' must be a number"),
        (('arch = "x86_64"\n', 'arch = "x86_64"\nbogus = 1\n'), "unknown key 'host.bogus'"),
    ],
)  # fmt: skip
def test_bad_host_keys_are_one_clear_line(tmp_path, edit, message):
    text = FULL
    for old, new in zip(edit[::2], edit[1::2], strict=True):
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "hw.toml"
    path.write_text(text)
    with pytest.raises(PlacementError) as info:
        load_hardware(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith(str(path))


def test_pim_hardware_refuses_modelled_host_latencies(tmp_path):
    path = tmp_path / "pim.toml"
    path.write_text('base = "pim-icelake"\n[host]\nlatency = "model"\n')
    with pytest.raises(PlacementError, match="is for CIM hardware"):
        load_pim_hardware(path)


def test_arch_families():
    assert {arch_family(a) for a in ("aarch64", "arm64", "armv7l", "ARM64")} == {"arm"}
    assert {arch_family(a) for a in ("x86_64", "AMD64", "i686")} == {"x86"}
    assert arch_family("riscv64") == "riscv64"


def test_host_latency_source_measured_modelled_and_mismatch():
    arm, x86 = load_hardware("arm-a72"), load_hardware("x86-ryzen")
    same = host_latency_source(x86.name, x86.host, MEASURED_X86)
    assert not same.mismatch and not same.estimate and same.warning is None
    assert same.label == "host latencies measured on x86_64 (Intel(R) Xeon(R) Processor)"

    wrong = host_latency_source(arm.name, arm.host, MEASURED_X86)
    assert wrong.mismatch and not wrong.estimate
    assert wrong.detail == "measured on x86_64 but the hardware describes aarch64: mismatch"
    assert wrong.warning is not None
    assert "measured on x86_64, but hardware 'arm-a72' describes another host" in wrong.warning
    assert "arm-a72-model" in wrong.warning  # the way out
    doc = wrong.to_json()
    assert doc["mismatch"] is True
    assert (doc["measured_arch"], doc["hardware_arch"]) == ("x86_64", "aarch64")
    assert doc["measured_on"] == MEASURED_X86

    model = load_hardware("arm-a72-model")
    est = host_latency_source(model.name, model.host, MEASURED_X86)  # the profile is unused
    assert est.estimate and not est.mismatch and est.warning is None
    assert est.label == "host latencies modelled for ARM Cortex-A72 (1 core) (estimate)"
    doc = est.to_json()
    assert doc["latencies"] == "model" and doc["estimate"] is True
    assert doc["measured_on"] is None and "placement.devices.host" in doc["model"]

    unknown = host_latency_source(arm.name, arm.host, None)
    assert not unknown.mismatch and unknown.detail == "measured (machine unknown)"
    # ARM profiles on ARM hardware match whatever the spelling
    assert not host_latency_source(arm.name, arm.host, {"machine": "arm64"}).mismatch
