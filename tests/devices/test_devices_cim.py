"""Eqs. 1-4 on hand-computed cases."""

import math

import pytest

from placement.devices.cim import accelerator_latency, crossbars_needed, transfer_latency
from placement.hardware.cim import load_hardware, with_overrides

pytestmark = pytest.mark.unit

ARM = load_hardware("arm-a72").cim  # 256x256 crossbars, 10.24 GB/s bus and internal, 1 B/elem


def test_eq1_crossbars_of_a_conv_layer():
    # Conv 64 -> 128, 3x3: M_v = 128, N_v = 64*3*3 = 576 -> ceil(128/256) * ceil(576/256) = 1 * 3
    assert crossbars_needed(128, 576, ARM) == 3
    # exactly one crossbar, and one cell over in each direction
    assert crossbars_needed(256, 256, ARM) == 1
    assert crossbars_needed(257, 256, ARM) == 2
    assert crossbars_needed(257, 257, ARM) == 4
    # ResNet-50's last 1x1 conv: 2048 x 512 -> 8 * 2
    assert crossbars_needed(2048, 512, ARM) == 16


def test_eq1_follows_crossbar_size():
    small = with_overrides(load_hardware("arm-a72"), crossbar_rows=128, crossbar_cols=64).cim
    assert crossbars_needed(128, 576, small) == 1 * 9


def test_eq2_eq3_accelerator_latency_of_a_conv_layer():
    # 56x56 output, stride 1: N_mvm = 3136; N_in = 64*56*56; N_out = 128*56*56
    lat = accelerator_latency(n_mvm=3136, n_in=64 * 56 * 56, n_out=128 * 56 * 56, spec=ARM)
    assert lat.mvm == pytest.approx(3136 * 50e-9)  # 156.8 us
    assert lat.load == pytest.approx(200704 / 10.24e9)  # 19.6 us
    assert lat.store == pytest.approx(401408 / 10.24e9)  # 39.2 us
    assert lat.total == pytest.approx(156.8e-6 + 19.6e-6 + 39.2e-6)


def test_eq3_scales_with_element_size_and_internal_bandwidth():
    spec = with_overrides(load_hardware("arm-a72"), elem_bytes=4, internal_gbps=1.0).cim
    lat = accelerator_latency(n_mvm=0, n_in=1000, n_out=500, spec=spec)
    assert lat.load == pytest.approx(4000 / 1e9)
    assert lat.store == pytest.approx(2000 / 1e9)
    assert lat.mvm == 0


def test_eq4_transfer_on_the_shared_bus():
    # a 64x56x56 int8 tensor over 10.24 GB/s, and over x86's 20.48 GB/s
    assert transfer_latency(200704, ARM) == pytest.approx(19.6e-6)
    x86 = load_hardware("x86-ryzen").cim
    assert transfer_latency(200704, x86) == pytest.approx(9.8e-6)
    assert math.isclose(transfer_latency(0, ARM), 0.0)
