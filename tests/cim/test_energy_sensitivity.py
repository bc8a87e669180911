"""Sensitivity of the latency-energy front to the energy constants: halved or doubled, the
front changes as the model says it must (properties proven below, not tuned numbers).

With E = H + A (H: the host's part, A: the accelerator's), every placement's latency is
independent of the constants, so:

* every constant times k: every energy times k, the same placements: the front's shape
  is unchanged, its energies scaled by k;
* the accelerator's constants times c: the minimum-latency end keeps its latency; at the
  minimum-energy end, E is non-decreasing in c, A non-increasing and H non-decreasing
  (for c1 < c2, optimality at both gives H1 + c1 A1 <= H2 + c1 A2 and H2 + c2 A2 <= H1 +
  c2 A1; adding, (c2 - c1)(A1 - A2) >= 0);
* the host's power times c: the same with the roles of H and A exchanged.

Checked on the bundled int8 model with its saved profile and on random instances.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from oracles import random_instance, with_energy

from placement.cim.energy import placement_energy
from placement.cim.instance import CimInstance
from placement.cim.pareto import pareto_front
from placement.graph import load_graph
from placement.hardware.cim import CIM_ENERGY_KEYS, Hardware, load_hardware, with_overrides
from placement.profiling.host_profile import HostProfile

ROOT = Path(__file__).resolve().parents[2]
CIM_SIDE = [k for k, (_, _, integral) in CIM_ENERGY_KEYS.items() if not integral]
REL = 1e-6


def scaled(hw: Hardware, cim: float = 1.0, host: float = 1.0) -> Hardware:
    """``hw`` with the accelerator's energy constants times ``cim``, the host power times
    ``host``."""
    values = hw.to_json()["cim"]
    hw = with_overrides(hw, **{k: values[k] * cim for k in CIM_SIDE})
    power = hw.host.active_power
    return dataclasses.replace(hw, host=dataclasses.replace(hw.host, active_power=power * host))


def bundled(hw: Hardware) -> CimInstance:
    from placement.cim.instance import build_instance

    graph = load_graph(str(ROOT / "examples" / "resnet_tiny_int8.onnx"))
    profile = HostProfile.load(ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json")
    return build_instance(graph, profile, hw)


def front_of(instance: CimInstance) -> list:
    front = pareto_front(instance, ("latency", "energy"), solver="highs", rel_gap=1e-9,
                         rel_step=1e-5)  # fmt: skip
    assert front.complete, front.note
    points = [front.steps[i][1] for i in front.points]
    return sorted(points, key=lambda p: p.values["latency"])


def parts(placement) -> tuple[float, float]:
    """(H, A) of a placement."""
    s = placement.schedule
    e = placement_energy(placement.instance, s.on_host, s.makespan)
    return e.host, e.accelerator


def scale_instance(instance: CimInstance, cim: float = 1.0, host: float = 1.0) -> CimInstance:
    ops = [dataclasses.replace(op, e_host=op.e_host * host,
                               e_mvm=None if op.e_mvm is None else op.e_mvm * cim,
                               e_internal=None if op.e_internal is None else op.e_internal * cim)
           for op in instance.operators]  # fmt: skip
    edges = [dataclasses.replace(e, e_transfer=e.e_transfer * cim) for e in instance.edges]
    return CimInstance.build(ops, edges, instance.crossbar_budget, instance.p_static * cim)


def instances() -> list[tuple[str, CimInstance]]:
    hw = with_overrides(load_hardware("arm-a72"), crossbars=50, t_mvm_ns=100)
    out = [("resnet_tiny_int8 on arm-a72", bundled(hw))]
    for seed in range(4):
        rng = random.Random(6600 + seed)
        base = random_instance(rng, 6, edge_prob=0.35, acc_factor_range=(0.2, 2.0))
        out.append((f"random {seed}", with_energy(base, rng, host_w=(0.5, 2.0),
                                                   acc_w=(0.05, 4.0))))  # fmt: skip
    return out


@pytest.mark.solver
@pytest.mark.parametrize("k", [0.5, 2.0])
def test_every_constant_scaled_scales_the_front_and_keeps_its_shape(k):
    hw = with_overrides(load_hardware("arm-a72"), crossbars=50, t_mvm_ns=100)
    base = front_of(bundled(hw))
    assert len(base) >= 2  # a front with a trade-off to keep
    other = front_of(bundled(scaled(hw, cim=k, host=k)))
    assert len(other) == len(base)
    for p, q in zip(base, other, strict=True):
        assert q.values["latency"] == pytest.approx(p.values["latency"], rel=REL)
        assert q.values["energy"] == pytest.approx(k * p.values["energy"], rel=REL)
        assert q.schedule.on_host == p.schedule.on_host


@pytest.mark.solver
@pytest.mark.parametrize("side", ["cim", "host"])
def test_one_side_halved_or_doubled_moves_the_front_as_the_model_says(side):
    moved = []  # per instance: operators offloaded at the minimum-energy end, x0.5 and x2
    for name, instance in instances():
        fronts = {c: front_of(scale_instance(instance, **{side: c})) for c in (0.5, 1.0, 2.0)}
        fastest = {c: f[0].values["latency"] for c, f in fronts.items()}
        assert fastest[0.5] == pytest.approx(fastest[2.0], rel=REL), name
        ends = {c: f[-1] for c, f in fronts.items()}  # the minimum-energy end
        energy = [ends[c].values["energy"] for c in (0.5, 1.0, 2.0)]
        assert energy[0] <= energy[1] * (1 + REL) and energy[1] <= energy[2] * (1 + REL), name
        h = [parts(ends[c])[0] for c in (0.5, 1.0, 2.0)]
        a = [parts(ends[c])[1] for c in (0.5, 1.0, 2.0)]
        scaled_side, other_side = (a, h) if side == "cim" else (h, a)
        # the scaled side's energy (at the factor 1) never grows with its constants, the
        # other side's never shrinks
        unscaled = [x / c for x, c in zip(scaled_side, (0.5, 1.0, 2.0), strict=True)]
        assert unscaled[0] >= unscaled[1] * (1 - REL) - 1e-15, name
        assert unscaled[1] >= unscaled[2] * (1 - REL) - 1e-15, name
        assert other_side[0] <= other_side[1] * (1 + REL) + 1e-15, name
        assert other_side[1] <= other_side[2] * (1 + REL) + 1e-15, name
        moved.append([sum(not h for h in ends[c].schedule.on_host.values()) for c in (0.5, 2.0)])
    # not vacuous: on some instance the end really moves (a dearer accelerator keeps more
    # operators on the host, a dearer host sends more to the accelerator)
    if side == "cim":
        assert any(cheap > dear for cheap, dear in moved), moved
    else:
        assert any(cheap < dear for cheap, dear in moved), moved
