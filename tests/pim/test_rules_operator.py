"""Operator-granularity rule (the paper's operator-level baseline): aggregation by hand."""

import pytest
from pim_oracles import nest, operand

from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.pim.instance import PimInstance
from placement.pim.rules import (
    aggregate_region,
    apply_operator_rule,
    apply_rule,
    operator_regions,
    operator_rule_placement,
)

SPEC = PimSpec()
MB = 1 << 20


def events(n_rd, store=0.0, stalls=100.0, p1=10.0, p2=10.0):
    return {
        "offcore_requests.all_data_rd": n_rd,
        "exe_activity.bound_on_stores": store,
        "cycle_activity.stalls_total": stalls,
        "exe_activity.1_ports_util": p1,
        "exe_activity.2_ports_util": p2,
    }


def program():
    """A 3-nest 'softmax' node (fill, reduction, elementwise x2 trips), a relu, an orphan."""
    nests = (
        nest(0, (operand("alloc0", 256, read=False, written=True),), n_iter=64, node="sm"),
        nest(1, (operand("arg0", MB, read=True, written=False, kind="argument"),
                 operand("alloc0", 256, read=True, written=True)),
             n_iter=64, n_total=64 * 4096, node="sm"),
        nest(2, (operand("arg0", MB, read=True, written=False, kind="argument"),
                 operand("alloc0", 256, read=True, written=False),
                 operand("arg1", MB, read=False, written=True, kind="argument")),
             n_iter=64 * 4096, trip_count=2, node="sm"),
        nest(3, (operand("arg1", MB, read=True, written=True, kind="argument"),),
             n_iter=64 * 4096, node="relu"),
        nest(4, (operand("arg1", MB, read=True, written=True, kind="argument"),), n_iter=4096),
    )  # fmt: skip
    t_cpu = {"n000": 1e-6, "n001": 400e-6, "n002": 600e-6, "n003": 300e-6, "n004": 5e-6}
    return nests, t_cpu


@pytest.mark.unit
def test_aggregation_by_hand():
    nests, t_cpu = program()
    counters = {
        "n000": events(0, store=50),
        "n001": events(1000, store=10),
        "n002": events(3000, store=0),
    }
    r = aggregate_region(nests[:3], t_cpu, counters)
    assert r.node == "sm" and r.nest_ids == ("n000", "n001", "n002")
    assert r.t_cpu == pytest.approx(1.001e-3)
    assert r.nest.n_iter == 64 * 4096  # max
    assert r.nest.n_total == 64 + 64 * 4096 + 2 * 64 * 4096  # work over all invocations
    assert r.nest.trip_count == 1
    # fetch: n001 reads 1 MiB (+256 B in place), n002 reads 1 MiB + 256 B twice
    assert r.nest.fetch_bytes == (MB + 256) + 2 * (MB + 256)
    assert r.nest.flush_bytes == 256 + 256 + 2 * MB
    assert r.counters["offcore_requests.all_data_rd"] == 4000
    assert r.counters["exe_activity.bound_on_stores"] == 60
    assert r.counters["cycle_activity.stalls_total"] == 300
    assert aggregate_region(nests[:3], t_cpu, counters, n_iter="min").nest.n_iter == 64


@pytest.mark.unit
def test_event_missing_in_one_nest_is_missing_for_the_region():
    nests, t_cpu = program()
    partial = events(1000)
    del partial["exe_activity.bound_on_stores"]
    counters = {"n000": events(0), "n001": partial, "n002": events(3000)}
    r = aggregate_region(nests[:3], t_cpu, counters)
    assert "exe_activity.bound_on_stores" not in r.counters
    assert r.counters["offcore_requests.all_data_rd"] == 4000
    assert aggregate_region(nests[:3], t_cpu, {"n001": events(1)}).counters is None
    assert aggregate_region(nests[:3], {"n000": 1e-6}, None).t_cpu is None


@pytest.mark.unit
def test_region_conditions_use_ratios_of_sums():
    nests, t_cpu = program()
    # n001 alone is memory-bound (4.1 GB/s), n002 alone is not (0.17 GB/s) ...
    counters = {"n000": events(0), "n001": events(25_600), "n002": events(1_600)}
    loop = apply_rule(nests, t_cpu, counters, SPEC, 32)
    assert [loop[k].place for k in ("n000", "n001", "n002")] == ["host", "pim", "host"]
    # ... the operator reads 27,200 lines in 1.001 ms: 1.74 GB/s <= theta, all on host
    op = apply_operator_rule(nests, t_cpu, counters, SPEC, 32)
    assert {op[k].place for k in ("n000", "n001", "n002")} == {"host"}
    c3 = next(c for c in op["n001"].conditions if c.name == "C3")
    assert c3.value == pytest.approx(27_200 * 64 / 1.001e-3)
    assert op["n001"].reason.startswith("operator sm (3 nests): C3 failed")
    c1 = op["n000"].conditions[0]
    assert c1.threshold == pytest.approx(SPEC.t_ctx + (64 + 3 * 64 * 4096) / (32 * 1e9))
    # With more reads in n002 the whole operator goes, the compute-bound fill included.
    counters["n002"] = events(10_000)
    op = apply_operator_rule(nests, t_cpu, counters, SPEC, 32)
    assert [op[k].place for k in ("n000", "n001", "n002")] == ["pim"] * 3


@pytest.mark.unit
def test_estimates_sum_fetch_bytes_and_n_iter_aggregate_matters():
    nests, t_cpu = program()
    op = apply_operator_rule(nests, t_cpu, None, SPEC, 128, allow_estimates=True)
    c3 = next(c for c in op["n000"].conditions if c.name == "C3")
    assert c3.estimated and c3.value == pytest.approx(3 * (MB + 256) / 1.001e-3)
    assert {op[k].place for k in ("n000", "n001", "n002")} == {"pim"}
    # min: the 64-row fill and reduction cannot be spread over 128 cores -> C2 fails.
    strict = apply_operator_rule(
        nests, t_cpu, None, SPEC, 128, allow_estimates=True, n_iter="min"
    )
    assert {strict[k].place for k in ("n000", "n001", "n002")} == {"host"}
    assert "C2 failed: N_iter 64 < N_core 128" in strict["n000"].reason
    # single-nest regions decide exactly like the loop rule
    loop = apply_rule(nests, t_cpu, None, SPEC, 128, allow_estimates=True)
    for k in ("n003", "n004"):
        assert op[k].place == loop[k].place
        assert op[k].conditions == loop[k].conditions


@pytest.mark.unit
def test_regions_instance_and_errors():
    nests, t_cpu = program()
    regions = operator_regions(nests, t_cpu)
    assert [r.nest_ids for r in regions] == [("n000", "n001", "n002"), ("n003",), ("n004",)]
    inst = PimInstance(nests=nests, t_cpu=t_cpu, spec=SPEC, n_cores=64)
    got = operator_rule_placement(inst, allow_estimates=True)
    assert list(got) == [n.id for n in nests]
    assert got == apply_operator_rule(nests, t_cpu, None, SPEC, 64, allow_estimates=True)
    with pytest.raises(PlacementError, match="N_iter aggregate"):
        aggregate_region(nests[:1], t_cpu, None, n_iter="mean")
    with pytest.raises(PlacementError, match="at least one"):
        aggregate_region((), t_cpu, None)


@pytest.mark.integration
def test_lowered_operator_decision_covers_all_its_nests(tmp_path):
    import onnx

    from placement.networks.workloads import layernorm
    from placement.profiling.mlir.lower import lower_onnx

    path = tmp_path / "ln.onnx"
    onnx.save(layernorm(1024), str(path))
    program = lower_onnx(path)
    assert len(program.nests) > 3
    # Synthetic host times: enough work per nest; estimates decide C3.
    t_cpu = {n.id: 50e-6 for n in program.nests}
    for cores in (32, 64, 128):
        op = apply_operator_rule(program.nests, t_cpu, None, SPEC, cores, allow_estimates=True)
        for region in operator_regions(program.nests, t_cpu):
            assert len({op[k].place for k in region.nest_ids}) == 1
        loop = apply_rule(program.nests, t_cpu, None, SPEC, cores, allow_estimates=True)
        if cores == 128:  # 64-row nests fail C2 per loop, the operator goes as a unit
            assert {d.place for d in loop.values()} == {"host", "pim"}
