"""Counter availability, the perf_event_open reading mechanism, counter files, nest profiles."""

from __future__ import annotations

import dataclasses
import json

import pytest
from onnx import helper
from onnx_builders import model, save, tensor

from placement.errors import PlacementError
from placement.profiling.counters import (
    ICELAKE_TABLE1,
    PERF_COUNT_SW_PAGE_FAULTS,
    PERF_COUNT_SW_TASK_CLOCK,
    PERF_TYPE_RAW,
    PERF_TYPE_SOFTWARE,
    TABLE1_EVENTS,
    CountersUnavailable,
    PerfEvent,
    PerfGroup,
    load_counters,
    table1_events,
)
from placement.profiling.nest_profile import NestProfile

IDS = ["n000", "n001", "n002"]
HEADER = "nest_id," + ",".join(TABLE1_EVENTS)
TASK_CLOCK = PerfEvent("task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK)
PAGE_FAULTS = PerfEvent("page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS)


def software_group_or_skip(events):
    try:
        return PerfGroup(events)
    except CountersUnavailable as exc:
        pytest.skip(f"no perf events at all here: {exc.reason}")


# --------------------------------------------------------------------------- detection


@pytest.mark.unit
def test_table1_detection_is_available_or_says_why_in_one_line():
    try:
        events = table1_events()
    except CountersUnavailable as exc:
        assert exc.reason and "\n" not in exc.reason
        return
    assert [e.name for e in events] == list(TABLE1_EVENTS)


@pytest.mark.unit
def test_icelake_raw_codes_follow_the_intel_encoding():
    def raw(event: int, umask: int, cmask: int = 0) -> int:
        return event | umask << 8 | cmask << 24

    codes = {e.name: e.config for e in ICELAKE_TABLE1}
    assert [e.name for e in ICELAKE_TABLE1] == list(TABLE1_EVENTS)
    assert all(e.type == PERF_TYPE_RAW for e in ICELAKE_TABLE1)
    assert codes["offcore_requests.all_data_rd"] == raw(0xB0, 0x08)
    assert codes["exe_activity.bound_on_stores"] == raw(0xA6, 0x40, 2)
    assert codes["cycle_activity.stalls_total"] == raw(0xA3, 0x04, 4)
    assert codes["exe_activity.1_ports_util"] == raw(0xA6, 0x02)
    assert codes["exe_activity.2_ports_util"] == raw(0xA6, 0x04)


@pytest.mark.unit
def test_perf_group_reads_a_group_of_software_events():
    with software_group_or_skip([TASK_CLOCK, PAGE_FAULTS]) as group:
        before = group.read()
        sum(range(200_000))
        _ = bytearray(8 << 20)  # touch fresh pages
        after = group.read()
    assert len(before) == len(after) == 2
    assert after[0] > before[0]  # task-clock ns advanced
    assert after[1] >= before[1]


@pytest.mark.integration
def test_count_nests_accumulates_per_nest_with_software_events(tmp_path):
    pytest.importorskip("torch_mlir")
    from placement.profiling.counters import count_nests
    from placement.profiling.mlir.lower import lower_onnx

    software_group_or_skip([TASK_CLOCK]).close()
    node = helper.make_node("Add", ["A", "B"], ["C"], name="add0")
    path = save(model([node], [tensor("A", [128, 128]), tensor("B", [128, 128])],
                      [tensor("C", [128, 128])]), tmp_path)  # fmt: skip
    program = lower_onnx(path)
    seen = []
    counts = count_nests(
        program, [TASK_CLOCK], runs=2, warmup=1, progress=lambda d, r: seen.append(d)
    )
    assert set(counts) == {n.id for n in program.nests}
    assert all(c["task-clock"] > 0 for c in counts.values())  # ns spent inside each nest
    assert seen == [1, 2]


# --------------------------------------------------------------------------- counter files


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.unit
def test_csv_counters_load_a_subset_of_nests(tmp_path):
    path = write(tmp_path, "c.csv", f"{HEADER},cycles\nn000,10,1,2,3,4,99\nn002,5,0,0,0,0,1\n")
    table = load_counters(path, IDS)
    assert list(table) == ["n000", "n002"]
    assert table["n000"] == dict(zip(TABLE1_EVENTS, [10.0, 1.0, 2.0, 3.0, 4.0], strict=True))


@pytest.mark.unit
def test_csv_header_is_case_insensitive_and_accepts_papi_prefixes(tmp_path):
    header = "NEST_ID," + ",".join(f"perf::{e.upper()}" for e in TABLE1_EVENTS)
    path = write(tmp_path, "c.csv", f"{header}\nn001,1,2,3,4,5\n")
    assert load_counters(path, IDS)["n001"]["exe_activity.2_ports_util"] == 5.0


@pytest.mark.unit
def test_csv_missing_columns_are_named(tmp_path):
    cols = ["nest_id", *TABLE1_EVENTS[:3]]
    path = write(tmp_path, "c.csv", ",".join(cols) + "\nn000,1,2,3\n")
    with pytest.raises(PlacementError, match="missing column.*exe_activity.1_ports_util"
                       ".*exe_activity.2_ports_util") as info:  # fmt: skip
        load_counters(path, IDS)
    assert "\n" not in str(info.value)


@pytest.mark.unit
def test_csv_unknown_nest_ids_are_named(tmp_path):
    path = write(tmp_path, "c.csv", f"{HEADER}\nn000,1,1,1,1,1\nn042,1,1,1,1,1\nx,1,1,1,1,1\n")
    with pytest.raises(PlacementError, match=r"unknown nest id\(s\) n042, x; .*n000\.\.n002"):
        load_counters(path, IDS)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("n000,1,2,3,4,-5", "must be a count >= 0"),
        ("n000,1,2,3,4,abc", "not a number: 'abc'"),
        ("n000,1,2,,4,5", "empty value"),
        ("n000,1,2,3,4", "has 5 fields, the header has 6"),
        ("n000,1,2,3,4,nan", "must be a count >= 0"),
        ("n000,1,2,3,4,inf", "must be a count >= 0, got inf"),
    ],
)
@pytest.mark.unit
def test_csv_bad_values_name_line_and_column(tmp_path, row, message):
    path = write(tmp_path, "c.csv", f"{HEADER}\n{row}\n")
    with pytest.raises(PlacementError, match=message) as info:
        load_counters(path, IDS)
    assert "line 2" in str(info.value)


@pytest.mark.unit
def test_csv_duplicate_nest_and_empty_file(tmp_path):
    path = write(tmp_path, "c.csv", f"{HEADER}\nn000,1,1,1,1,1\nn000,1,1,1,1,1\n")
    with pytest.raises(PlacementError, match="line 3: nest 'n000' appears twice"):
        load_counters(path, IDS)
    with pytest.raises(PlacementError, match="empty counters file"):
        load_counters(write(tmp_path, "e.csv", "\n"), IDS)
    with pytest.raises(PlacementError, match="no such counters file"):
        load_counters(tmp_path / "absent.csv", IDS)


@pytest.mark.unit
def test_json_counters_plain_and_wrapped(tmp_path):
    events = dict(zip(TABLE1_EVENTS, [1, 2, 3, 4, 5], strict=True))
    plain = write(tmp_path, "c.json", json.dumps({"n001": events}))
    wrapped = write(tmp_path, "w.json", json.dumps({"counters": {"n001": events}}))
    assert load_counters(plain, IDS) == load_counters(wrapped, IDS)
    missing = write(tmp_path, "m.json", json.dumps({"n001": {TABLE1_EVENTS[0]: 1}}))
    with pytest.raises(PlacementError, match="nest 'n001': missing event"):
        load_counters(missing, IDS)
    unknown = write(tmp_path, "u.json", json.dumps({"n009": events}))
    with pytest.raises(PlacementError, match="unknown nest id"):
        load_counters(unknown, IDS)
    with pytest.raises(PlacementError, match="not a JSON counters file"):
        load_counters(write(tmp_path, "b.json", "{nope"), IDS)


# --------------------------------------------------------------------------- nest profile file


def small_profile() -> NestProfile:
    from placement.nests import LoopNest, NestOperand

    op = NestOperand("arg0", "argument", (4,), "f32", 16, True, True)
    nests = [LoopNest(f"n00{i}", i, "a", "Relu", "linalg.generic", 4, 4, 1, (op,)) for i in (0, 1)]
    return NestProfile(
        nests=nests,
        t_cpu={"n000": 1e-6, "n001": 2e-6},
        counters=None,
        counter_source="unavailable: no PMU",
        model_sha256="0" * 64,
        model_path="m.onnx",
        source_kind="onnx",
        metadata={"runs": 3},
    )


@pytest.mark.unit
def test_nest_profile_round_trip_and_checks(tmp_path):
    profile = small_profile()
    path = tmp_path / "p.nests.json"
    profile.save(path)
    loaded = NestProfile.load(path)
    assert loaded == profile
    assert loaded.counters_unavailable_reason == "no PMU"
    loaded.check_matches("0" * 64, "m.onnx")
    with pytest.raises(PlacementError, match="was measured on m.onnx .* re-run `placement"
                       " profile other.onnx --target pim"):  # fmt: skip
        loaded.check_matches("1" * 64, "other.onnx")
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(version=9), "format version 9 is not supported"),
        (lambda d: d.update(format="placement-host-profile"), "use --target cim"),
        (lambda d: d["t_cpu"].pop("n001"), "nest 'n001' has no 't_cpu'"),
        (lambda d: d["t_cpu"].update(n000=-1), "must be a non-negative number"),
        (lambda d: d.update(counter_source="measured"), "null exactly when"),
        (lambda d: d.update(counters={"n000": {}}, counter_source="measured"), "miss event"),
        (lambda d: d["nests"][0].pop("n_iter"), "nest #0 is not a loop nest"),
    ],
)
@pytest.mark.unit
def test_nest_profile_rejects_bad_files_in_one_line(tmp_path, edit, message):
    data = small_profile().to_json()
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PlacementError, match=message) as info:
        NestProfile.load(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


@pytest.mark.unit
def test_nest_profile_with_measured_counters_round_trips(tmp_path):
    events = dict(zip(TABLE1_EVENTS, [1.0, 2.0, 3.0, 4.0, 5.0], strict=True))
    profile = dataclasses.replace(
        small_profile(), counters={"n000": events}, counter_source="measured"
    )
    profile.save(tmp_path / "p.json")
    assert NestProfile.load(tmp_path / "p.json").counters == {"n000": events}
