"""Measured host power from RAPL (placement.profiling.rapl), on a powercap tree laid out as
the kernel lays it out (this VM has no /sys/class/powercap): package zones only, the
counter's wrap, the idle power taken off, and an unreadable counter."""

from __future__ import annotations

import os

import pytest

from placement.profiling import rapl
from placement.profiling.rapl import EnergyMeter, measured_power, package_zones


def zone(root, name, index, energy_uj, wrap=262143328850):
    path = root / f"intel-rapl:{index}"
    path.mkdir(parents=True)
    (path / "name").write_text(f"{name}\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{wrap}\n")
    sub = root / f"intel-rapl:{index}:0"  # a core subzone: not a package
    sub.mkdir()
    (sub / "name").write_text("core\n")
    (sub / "energy_uj").write_text("5\n")
    (sub / "max_energy_range_uj").write_text(f"{wrap}\n")
    return path


@pytest.mark.unit
def test_package_zones_and_what_is_missing(tmp_path):
    zones, why = package_zones(tmp_path / "absent")
    assert zones == [] and "does not exist" in why
    zones, why = package_zones(tmp_path)
    assert zones == [] and "no RAPL package zone" in why
    zone(tmp_path, "package-0", 0, 100)
    zone(tmp_path, "package-1", 1, 200)
    zones, why = package_zones(tmp_path)
    assert why is None and [z.name for z in zones] == ["package-0", "package-1"]
    assert EnergyMeter.open(tmp_path / "absent") is None


@pytest.mark.unit
@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_counter_says_so(tmp_path):
    path = zone(tmp_path, "package-0", 0, 100)
    (path / "energy_uj").chmod(0)
    zones, why = package_zones(tmp_path)
    assert zones == [] and "need root" in why


class Clock:
    """A clock that advances only when slept on, and a package that draws ``watts`` then,
    writing its counter as the kernel does (wrapping at ``wrap``)."""

    def __init__(self, counter, start_uj: int, wrap: int) -> None:
        self.now, self.uj, self.wrap, self.watts, self.counter = 0.0, start_uj, wrap, 2.0, counter

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.uj = (self.uj + round(self.watts * seconds * 1e6)) % self.wrap
        self.counter.write_text(f"{self.uj}\n")


@pytest.mark.unit
def test_energy_across_a_wrap_and_the_power_above_idle(tmp_path, monkeypatch):
    path = zone(tmp_path, "package-0", 0, 9_500_000, wrap=10_000_000)
    meter = EnergyMeter.open(tmp_path)
    assert meter is not None
    assert meter.joules([9_999_000], [3_000]) == pytest.approx(4_000e-6)  # wrapped once
    clock = Clock(path / "energy_uj", 9_500_000, 10_000_000)
    monkeypatch.setattr(rapl, "time", clock)
    meter.start(idle_seconds=0.5)  # 2 W idle: 1 J, past the wrap
    clock.watts = 5.0
    clock.sleep(0.3)  # the runs: 2 W idle + 3 W more
    clock.watts = 2.0
    clock.sleep(0.1)  # a pause between rounds
    result = meter.stop(busy_seconds=0.3)
    assert result is not None
    assert result.idle_w == pytest.approx(2.0)
    assert result.active_w == pytest.approx(3.0)
    assert result.wall_seconds == pytest.approx(0.4)
    assert measured_power({"host_power": result.to_json()}) == (result.active_w,
                                                                 result.to_json()["source"])
    assert measured_power({}) is None and measured_power(None) is None
    assert meter.stop(busy_seconds=0.0) is None
