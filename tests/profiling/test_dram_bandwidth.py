"""B_cpu, the host's single-thread DRAM read bandwidth: the method's bounds (buffer size,
statistic, record), plausibility of the figure -- bounds, never timings -- and its place
in the nest profile, which still loads files written before it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from placement.errors import PlacementError
from placement.profiling.cache_flush import llc_bytes
from placement.profiling.dram_bandwidth import (
    LLC_MULTIPLE,
    MAX_BUFFER_BYTES,
    MIB,
    MIN_BUFFER_BYTES,
    describe,
    dram_buffer_bytes,
    measure_dram_read,
)
from placement.profiling.nest_profile import NestProfile

pytestmark = pytest.mark.unit

# written before host_dram_read existed
OLD_PROFILE = Path(__file__).resolve().parents[1] / "golden" / "resnet_tiny.nests.json"


@pytest.fixture(scope="module")
def measured():
    return measure_dram_read(repetitions=5)


def test_the_buffer_is_several_times_the_last_level_cache():
    assert dram_buffer_bytes(32 * MIB) == 128 * MIB
    assert dram_buffer_bytes(1 * MIB) == MIN_BUFFER_BYTES  # small caches: at least 128 MiB
    assert dram_buffer_bytes(320 * MIB) == MAX_BUFFER_BYTES  # a VM's huge "L3": capped
    assert dram_buffer_bytes(100 * MIB + 3) % 64 == 0


def test_the_measurement_is_plausible_and_says_how_it_was_made(measured):
    record = measured.to_json()
    llc = llc_bytes()
    if llc is not None:
        assert record["llc_bytes"] == llc and record["llc_source"] == "sysfs"
        assert measured.buffer_bytes >= min(MAX_BUFFER_BYTES, LLC_MULTIPLE * llc)
    # a real memory system: above a floppy disk, below any DRAM ever built for one core
    assert 0.1 < record["gbps"] < 2000
    assert record["min_gbps"] <= record["gbps"] <= record["max_gbps"]
    assert record["gbps"] == pytest.approx(statistics.median(record["samples_gbps"]))
    assert len(record["samples_gbps"]) == 5 and record["threads"] == 1
    assert record["in_cache_buffer_bytes"] < record["llc_bytes"] <= record["buffer_bytes"] or (
        record["buffer_bytes"] == MAX_BUFFER_BYTES)  # fmt: skip
    assert isinstance(record["memory_bound"], bool)
    assert "median of 5 passes" in record["method"] and "MiB" in record["method"]
    assert json.loads(json.dumps(record)) == record  # stored as plain JSON
    assert describe(record).startswith(f"{record['gbps']:.4g} GB/s (1-thread NumPy sum")


def test_a_buffer_within_the_cache_is_said_to_be_one():
    small = measure_dram_read(repetitions=2, buffer_bytes=MIB)
    assert small.buffer_bytes == MIB
    assert any("only" in note and "last-level cache" in note for note in small.notes)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"repetitions": 0}, "repetitions must be >= 1"),
    ({"buffer_bytes": 8}, "at least 64 bytes"),
])  # fmt: skip
def test_bad_arguments_are_one_line(kwargs, message):
    with pytest.raises(PlacementError, match=message):
        measure_dram_read(**kwargs)


def test_profiles_written_before_b_cpu_load_without_it():
    profile = NestProfile.load(OLD_PROFILE)
    assert "host_dram_read" not in json.loads(OLD_PROFILE.read_text())
    assert profile.host_dram_read is None and profile.host_dram_bandwidth is None
    assert profile.to_json()["host_dram_read"] is None


def test_the_profile_keeps_the_record_and_refuses_a_broken_one(tmp_path, measured):
    profile = NestProfile.load(OLD_PROFILE)
    profile.host_dram_read = measured.to_json()
    profile.save(tmp_path / "p.json")
    again = NestProfile.load(tmp_path / "p.json")
    assert again.host_dram_read == measured.to_json()
    assert again.host_dram_bandwidth == pytest.approx(measured.bytes_per_second)
    for broken in ({"gbps": 0}, {"gbps": -3.0}, {"gbps": True}, {"method": "x"}, [1.0], 12.0):
        data = json.loads((tmp_path / "p.json").read_text())
        data["host_dram_read"] = broken
        (tmp_path / "bad.json").write_text(json.dumps(data))
        with pytest.raises(PlacementError, match="'host_dram_read' must be null or an object"):
            NestProfile.load(tmp_path / "bad.json")
