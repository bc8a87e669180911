"""PIM times from a file (``--pim-times``): formats, one clear line for every bad input, and
the instance's T_pim taken from the file for the nests it names (the model for the others)."""

import json

import pytest
from pim_oracles import nest, operand

from placement.devices.pim import t_pim, t_pim_min
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.pim.instance import PimInstance
from placement.pim.pipeline import solve
from placement.pim.rules import rule_placement
from placement.pim.times import PimTimes, load_pim_times

SPEC = PimSpec()
IDS = ["n000", "n001", "n002"]
CSV = "nest_id,cores,t_pim_s\nn000,32,1e-5\nn000,64,6e-6\nn002,32,2e-6\nn002,64,1.5e-6\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def one_line_error(call, *fragments):
    with pytest.raises(PlacementError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def three_nests():
    a = nest(0, (operand("x", 1 << 20, read=True, written=False),), n_iter=1 << 18)
    b = nest(1, (operand("y", 1 << 20, read=True, written=True),), n_iter=1 << 18)
    c = nest(2, (operand("z", 4096, read=True, written=True),), n_iter=1024)
    return (a, b, c)


# --------------------------------------------------------------------------- formats


@pytest.mark.unit
def test_csv_and_json_give_the_same_table(tmp_path):
    from_csv = load_pim_times(write(tmp_path, "t.csv", CSV))
    doc = {"n000": {"32": 1e-5, "64": 6e-6}, "n002": {"32": 2e-6, "64": 1.5e-6}}
    from_json = load_pim_times(write(tmp_path, "t.json", json.dumps(doc)))
    assert from_csv.times == from_json.times == {
        "n000": {32: 1e-5, 64: 6e-6}, "n002": {32: 2e-6, 64: 1.5e-6}
    }  # fmt: skip
    assert from_csv.source is None and "measured or simulated" in from_csv.label
    assert from_csv.at(64) == {"n000": 6e-6, "n002": 1.5e-6}
    wrapped = {"source": "PIMProf/Sniper, 1 GHz in-order", "pim_times": doc}
    times = load_pim_times(write(tmp_path, "w.json", json.dumps(wrapped)))
    assert times.times == from_json.times
    assert times.label.endswith("(measured or simulated: PIMProf/Sniper, 1 GHz in-order)")
    assert times.to_json()["times"]["n000"] == {"32": 1e-5, "64": 6e-6}


@pytest.mark.unit
def test_csv_header_order_case_and_extra_columns(tmp_path):
    text = "T_PIM_S,Nest_ID,note,CORES\n1e-5,n000,sim,32\n\n2e-6,n002,,32\n"
    times = load_pim_times(write(tmp_path, "t.csv", text))
    assert times.times == {"n000": {32: 1e-5}, "n002": {32: 2e-6}}


# --------------------------------------------------------------------------- bad files


@pytest.mark.unit
@pytest.mark.parametrize(
    ("row", "fragments"),
    [
        ("n000,32,-1e-6", ("line 2", "nest 'n000', 32 cores", "must be a time in seconds >= 0")),
        ("n000,32,nan", ("line 2", "must be a time in seconds >= 0, got nan")),
        ("n000,32,inf", ("line 2", "must be a time in seconds >= 0, got inf")),
        ("n000,32,fast", ("line 2", "not a number: 'fast'")),
        ("n000,32,", ("line 2", "empty value")),
        ("n000,0,1e-6", ("line 2", "cores must be a positive whole number, got '0'")),
        ("n000,2.5,1e-6", ("line 2", "cores must be a positive whole number, got '2.5'")),
        (",32,1e-6", ("line 2", "empty nest_id")),
        ("n000,32", ("line 2 has 2 fields, the header has 3",)),
    ],
)
def test_csv_bad_rows_name_file_and_line(tmp_path, row, fragments):
    path = write(tmp_path, "t.csv", f"nest_id,cores,t_pim_s\n{row}\n")
    one_line_error(lambda: load_pim_times(path), str(path), *fragments)


@pytest.mark.unit
def test_bad_files(tmp_path):
    dup = write(tmp_path, "d.csv", "nest_id,cores,t_pim_s\nn000,32,1e-6\nn000,32,2e-6\n")
    one_line_error(lambda: load_pim_times(dup), "line 3: nest 'n000' at 32 cores appears twice")
    cols = write(tmp_path, "c.csv", "nest_id,t_pim_s\nn000,1e-6\n")
    one_line_error(lambda: load_pim_times(cols), "missing column(s) cores")
    one_line_error(lambda: load_pim_times(write(tmp_path, "e.csv", "\n")), "empty PIM times file")
    header_only = write(tmp_path, "h.csv", "nest_id,cores,t_pim_s\n")
    one_line_error(lambda: load_pim_times(header_only), "no PIM times in the file")
    one_line_error(lambda: load_pim_times(tmp_path / "absent.csv"), "no such PIM times file")
    one_line_error(lambda: load_pim_times(tmp_path), "is a directory")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{nope", "not a JSON PIM times file"),
        ('{"n000": {"32": NaN}}', "NaN is not a valid time"),
        ('{"n000": {"32": Infinity}}', "Infinity is not a valid time"),
        ('{"n000": {"32": -1}}', "nest 'n000', 32 cores: must be a time in seconds >= 0"),
        ('{"n000": {"32": "1e-6x"}}', "not a number: '1e-6x'"),
        ('{"n000": {"32": true}}', "not a number: True"),
        ('{"n000": {"many": 1e-6}}', "cores must be a positive whole number, got 'many'"),
        ('{"n000": 1e-6}', "nest 'n000': expected an object of core count -> seconds"),
        ('{"n000": {}}', "nest 'n000': no core counts"),
        ("[1, 2]", "expected an object of nest id"),
        ('{"pim_times": {}, "sorce": "x"}', "unknown key 'sorce'"),
        ('{"pim_times": {"n000": {"32": 1}}, "source": 7}', "'source' must be a string"),
        ('{"pim_times": {"n000": {"32": 1}}, "memory": "hbm"}', "'memory' must be one of"),
    ],
)
def test_json_bad_values_one_line(tmp_path, text, fragment):
    path = write(tmp_path, "t.json", text)
    one_line_error(lambda: load_pim_times(path), str(path), fragment)


@pytest.mark.unit
def test_unknown_nests_and_missing_core_counts(tmp_path):
    times = load_pim_times(write(tmp_path, "t.csv", CSV + "n042,32,1e-6\nx,32,1e-6\n"))
    one_line_error(lambda: times.check_nests(IDS), "unknown nest id(s) n042, x", "n000..n002")
    times = load_pim_times(write(tmp_path, "t2.csv", CSV))
    times.check_cores([32, 64])
    one_line_error(
        lambda: times.check_cores([32, 64, 128]),
        "nest 'n000' has no T_pim for N_core 128 (the file gives 32, 64)", "--pim-cores",
    )


@pytest.mark.unit
def test_one_check_against_the_model_nests_core_counts_and_memory(tmp_path):
    doc = {"memory": "shared", "pim_times": {"n000": {"32": 1e-6, "64": 5e-7}}}
    times = load_pim_times(write(tmp_path, "t.json", json.dumps(doc)))
    times.check("shared", [32, 64], IDS)
    times.check(None, [64])  # nests not known yet, hardware without an architecture
    one_line_error(lambda: times.check("shared", [32], ["n001"]), "unknown nest id(s) n000")
    one_line_error(lambda: times.check("shared", [128], IDS), "no T_pim for N_core 128")
    one_line_error(lambda: times.check("partitioned", [32], IDS),
                   "for a shared-memory device, the PIM hardware is partitioned")  # fmt: skip
    # Every fault at once: the nests are named first, then the core counts.
    one_line_error(lambda: times.check("partitioned", [128], ["n001"]), "unknown nest")
    one_line_error(lambda: times.check("partitioned", [128]), "N_core 128")


# --------------------------------------------------------------------------- the instance


@pytest.mark.unit
def test_instance_takes_file_times_for_named_nests_only():
    nests = three_nests()
    t_cpu = {n.id: 1e-4 for n in nests}
    file = PimTimes("sim.csv", {"n000": {32: 7e-6, 64: 5e-6}, "n002": {32: 0.0, 64: 1e-9}})
    inst = PimInstance(nests, t_cpu, SPEC, measured=file)
    assert inst.pim_times["n000"] == 7e-6 and inst.pim_times["n002"] == 0.0
    assert inst.pim_times["n001"] == t_pim(nests[1], SPEC, 32)  # not in the file: the model
    assert inst.pim_time_sources == {
        "n000": "file", "n001": "analytical model", "n002": "file"
    }  # fmt: skip
    at64 = inst.with_cores(64)
    assert at64.pim_times["n000"] == 5e-6
    assert at64.pim_times["n001"] == t_pim(nests[1], SPEC, 64)
    with pytest.raises(PlacementError, match="no T_pim for N_core 128"):
        inst.with_cores(128)
    with pytest.raises(PlacementError, match="unknown nest id.*n009"):
        PimInstance(nests, t_cpu, SPEC, measured=PimTimes("f.csv", {"n009": {32: 1e-6}}))
    # times given in code win over the file's
    given = PimInstance(nests, t_cpu, SPEC, t_pim={"n000": 1e-9}, measured=file)
    assert given.pim_times["n000"] == 1e-9 and given.pim_time_sources["n000"] == "given"


@pytest.mark.solver
def test_solve_uses_the_file_times_and_rule_c1_stays_analytical():
    nests = three_nests()
    t_cpu = {"n000": 200e-6, "n001": 50e-6, "n002": 50e-6}
    analytical = solve(PimInstance(nests, t_cpu, SPEC), copy="upper_bound")
    assert analytical.on_pim == {"n000": True, "n001": False, "n002": True}
    # A simulator says n000 is hopeless on PIM and n002 nearly free: the optimum follows.
    simulated = {"n000": {32: 1.0}, "n002": {32: 1e-9}}
    inst = PimInstance(nests, t_cpu, SPEC, measured=PimTimes("sim.json", simulated))
    placed = solve(inst, copy="upper_bound")
    assert placed.on_pim == {"n000": False, "n001": False, "n002": True}
    assert placed.verification is not None and placed.verification.ok
    assert placed.hybrid is not None and placed.hybrid.pim == pytest.approx(1e-9)
    assert placed.hybrid.host == pytest.approx(250e-6)
    # The rule's C1 uses the analytical lower bound, not the file's times.
    rule = rule_placement(inst)
    c1 = rule["n000"].conditions[0]
    assert c1.name == "C1" and c1.threshold == pytest.approx(SPEC.t_ctx + t_pim_min(nests[0], SPEC))


@pytest.mark.unit
def test_times_for_another_memory_architecture_are_refused(tmp_path):
    doc = {"memory": "partitioned", "pim_times": {"n000": {"32": 1e-6}}}
    times = load_pim_times(write(tmp_path, "t.json", json.dumps(doc)))
    assert times.memory == "partitioned" and times.to_json()["memory"] == "partitioned"
    times.check_memory("partitioned")
    times.check_memory(None)  # hardware that states no architecture: nothing to compare
    one_line_error(lambda: times.check_memory("shared"), "t.json",
                   "for a partitioned-memory device, the PIM hardware is shared")  # fmt: skip
    one_line_error(lambda: PimInstance(three_nests(), {"n000": 1e-6, "n001": 1e-6,
                                                       "n002": 1e-6}, SPEC, measured=times),
                   "t.json", "partitioned-memory device")  # fmt: skip
