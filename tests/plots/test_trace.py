"""``solve --trace FILE``: the schedule as Chrome trace-event JSON, checked for the format's
structure (what Perfetto and chrome://tracing read) and for the schedule it carries: every
operator or nest once, on its device, at its start, for its duration."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import assert_one_line_error, run
from test_plots import INT8, saved_pim_profile

from placement.plots.timeline import Interval, Timeline
from placement.plots.trace import chrome_trace

PROFILE = Path(__file__).resolve().parents[1] / "golden" / "resnet_tiny_int8.profile.json"
US = 1e6


def _strict_json(path: Path) -> dict[str, Any]:
    """The file as JSON; NaN or Infinity (not JSON, refused by viewers) fail the test."""

    def refuse(token: str) -> None:
        raise AssertionError(f"{path}: {token} is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def check_trace_format(doc: dict[str, Any]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """The Trace Event Format's JSON object form as the viewers read it: metadata events
    naming every process and thread that has work, complete events with numeric
    microsecond times, and the events of one thread properly nested (here: disjoint).
    Returns the complete events per (pid, tid)."""
    assert set(doc) == {"traceEvents", "displayTimeUnit", "otherData"}
    assert doc["displayTimeUnit"] in ("ms", "ns")
    assert isinstance(doc["otherData"], dict)
    processes: dict[int, str] = {}
    threads: set[tuple[int, int]] = set()
    work: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"], e
        assert type(e["pid"]) is int, e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name"), e
            if e["name"] == "process_name":
                processes[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                assert type(e["tid"]) is int and isinstance(e["args"]["name"], str), e
                threads.add((e["pid"], e["tid"]))
            else:
                assert type(e["args"]["sort_index"]) is int, e
            continue
        assert e["ph"] == "X", e
        assert type(e["tid"]) is int and isinstance(e["cat"], str), e
        for key in ("ts", "dur"):
            assert isinstance(e[key], float | int) and math.isfinite(e[key]), e
            assert e[key] >= 0, e
        assert isinstance(e["args"], dict), e
        work[(e["pid"], e["tid"])].append(e)
    assert len(set(processes.values())) == len(processes)  # one process per device
    for (pid, tid), events in work.items():
        assert pid in processes and (pid, tid) in threads, (pid, tid)
        events.sort(key=lambda e: (e["ts"], e["dur"]))
        for a, b in zip(events, events[1:], strict=False):
            assert b["ts"] >= a["ts"] + a["dur"] - 1e-6, (a, b)  # no partial overlap
    return work


def _by_device(doc: dict[str, Any], cat: str) -> dict[str, dict[str, Any]]:
    """Complete events of category ``cat`` by name, each with its device's process name;
    every name must occur once."""
    processes = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}  # fmt: skip
    out: dict[str, dict[str, Any]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == cat:
            assert e["name"] not in out, f"{e['name']} twice"
            out[e["name"]] = dict(e, device=processes[e["pid"]])
    return out


@pytest.mark.integration
def test_cim_trace_round_trips_the_schedule(capsys, tmp_path):
    trace, js = tmp_path / "s.trace.json", tmp_path / "r.json"
    code, _, err = run(capsys, "solve", INT8, "--profile", PROFILE, "--crossbars", "20",
                       "--trace", trace, "--json", js, "-q")  # fmt: skip
    assert code == 0, err
    doc = _strict_json(trace)
    check_trace_format(doc)
    result = json.loads(js.read_text())
    schedule = result["schedule"]
    ops = _by_device(doc, "operator")
    assert set(ops) == set(schedule["operators"])  # every operator exactly once
    devices = {"host": "host CPU", "cim": "CIM"}
    for name, s in schedule["operators"].items():
        e = ops[name]
        assert e["device"] == devices[s["device"]], name
        assert e["ts"] == pytest.approx(s["start"] * US, rel=1e-12, abs=1e-9), name
        assert e["dur"] == pytest.approx((s["finish"] - s["start"]) * US, rel=1e-12, abs=1e-9)
    assert {d for d in (e["device"] for e in ops.values())} == {"host CPU", "CIM"}
    # a transfer on the bus for every edge between devices, from the producer's finish
    transfers = _by_device(doc, "transfer")
    assert transfers and all(e["device"] == "bus" for e in transfers.values())
    for name, e in transfers.items():
        u, v = name.split("->")
        assert schedule["operators"][u]["device"] != schedule["operators"][v]["device"]
        assert e["ts"] == pytest.approx(schedule["operators"][u]["finish"] * US, rel=1e-12)
    assert doc["otherData"]["end_us"] == pytest.approx(schedule["makespan"] * US, rel=1e-12)
    assert doc["otherData"]["hardware"] == "x86-ryzen"


@pytest.mark.integration
def test_pim_trace_round_trips_the_nests_of_the_first_core_count(capsys, tmp_path):
    model, saved = saved_pim_profile(tmp_path)
    trace, js = tmp_path / "t.json", tmp_path / "r.json"
    # Eq. 8's copy accounting: this profile's placement then uses both devices (with the
    # preset's shared memory every nest goes to PIM).
    code, _, err = run(capsys, "solve", model, "--target", "pim", "--profile", saved,
                       "--pim-cores", "64,32", "--copy", "upper_bound", "--trace", trace,
                       "--json", js, "-q")  # fmt: skip
    assert code == 0, err
    doc = _strict_json(trace)
    check_trace_format(doc)
    result = json.loads(js.read_text())["results"][0]  # 64 cores: the first given
    decisions = result["model"]["decisions"]
    nests = _by_device(doc, "nest")
    assert set(nests) == set(decisions)
    for nid, where in decisions.items():
        assert nests[nid]["device"] == {"host": "host CPU", "pim": "PIM"}[where], nid
    assert {"host", "pim"} <= set(decisions.values())  # both devices are exercised
    t_cpu = {n["id"]: n["t_cpu"] for n in json.loads(js.read_text())["nests"]}
    for nid, e in nests.items():
        if decisions[nid] == "host":
            assert e["dur"] == pytest.approx(t_cpu[nid] * US, rel=1e-12)
    # one after another: the work (nests, copies, switches) tiles [0, T_hybrid]
    work = sorted((e for e in doc["traceEvents"] if e["ph"] == "X"), key=lambda e: e["ts"])
    assert work[0]["ts"] == 0
    for a, b in zip(work, work[1:], strict=False):
        assert b["ts"] == pytest.approx(a["ts"] + a["dur"], rel=1e-9, abs=1e-9)
    end = work[-1]["ts"] + work[-1]["dur"]
    assert end == pytest.approx(result["model"]["hybrid"]["total"] * US, rel=1e-9)
    assert doc["otherData"]["pim_cores"] == 64
    switches = _by_device(doc, "switch")
    assert switches and all(e["device"] == "host CPU" for e in switches.values())


@pytest.mark.unit
def test_parallel_work_on_one_device_gets_lanes_that_nest():
    # CIM operators on separate crossbars overlap: they go to lanes of the CIM process.
    timeline = Timeline("cim", [
        Interval("host", "operator", "a", 0.0, 2e-6),
        Interval("cim", "operator", "b", 2e-6, 9e-6),
        Interval("cim", "operator", "c", 3e-6, 5e-6),
        Interval("cim", "operator", "d", 5e-6, 6e-6),
        Interval("bus", "transfer", "a->b", 2e-6, 2e-6),
    ], end=9e-6)  # fmt: skip
    doc = chrome_trace(timeline)
    work = check_trace_format(doc)
    lanes = {e["name"]: (e["pid"], e["tid"]) for es in work.values() for e in es}
    assert lanes["b"][0] == lanes["c"][0] == lanes["d"][0] != lanes["a"][0]
    assert lanes["b"] != lanes["c"] and lanes["c"] == lanes["d"]
    assert lanes["a->b"][0] not in (lanes["a"][0], lanes["b"][0])  # the bus
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {"host CPU", "CIM", "bus"}


@pytest.mark.unit
@pytest.mark.parametrize("name", ["t.txt", "nodir/t.json"])
def test_trace_bad_path_fails_before_solving(capsys, tmp_path, name):
    code, _, err = run(capsys, "solve", INT8, "--trace", tmp_path / name, "--profile", PROFILE)
    assert_one_line_error(code, err, "--trace")
    assert list(tmp_path.iterdir()) == []
