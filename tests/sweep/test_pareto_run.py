"""A Pareto front carried by the sweep's machinery (placement.sweep.pareto): the same front
in this process, in two worker processes and on a Dask cluster; a run stopped part-way
resumes from its log; its files refuse to be mistaken for a sweep's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.hardware.cim import load_hardware, with_overrides
from placement.sweep.pareto import ParetoStore, run_pareto
from placement.sweep.plan import SolverOptions

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "resnet_tiny_int8.onnx"
PROFILE = ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json"
SETTINGS = SolverOptions(time_limit=60, rel_gap=1e-9, threads=1, solver="highs")


def hardware():
    return with_overrides(load_hardware("arm-a72"), crossbars=50, t_mvm_ns=100)


def values(result) -> list[tuple[float, ...]]:
    return [(r["latency_s"], r["energy_j"], r["crossbars"]) for r in result.front]


@pytest.mark.integration
def test_the_same_front_here_in_worker_processes_and_on_dask(tmp_path):
    distributed = pytest.importorskip("distributed")
    axes = ("energy", "crossbars")
    here = run_pareto(MODEL, hardware(), axes, tmp_path / "here", settings=SETTINGS,
                      profile=PROFILE)  # fmt: skip
    two = run_pareto(MODEL, hardware(), axes, tmp_path / "two", settings=SETTINGS,
                     profile=PROFILE, workers=2)  # fmt: skip
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:  # fmt: skip
        dask = run_pareto(MODEL, hardware(), axes, tmp_path / "dask", settings=SETTINGS,
                          profile=PROFILE, scheduler=cluster.scheduler_address)  # fmt: skip
    assert here.complete and len(here.front) >= 5
    assert values(here) == values(two) == values(dask)
    for r in here.front:  # the placements too (HiGHS on one thread is deterministic)
        docs = [json.loads((tmp_path / d / "schedules" / f"{r['point_id']}.json").read_text())
                for d in ("here", "two", "dask")]  # fmt: skip
        assert docs[0]["schedule"] == docs[1]["schedule"] == docs[2]["schedule"]


@pytest.mark.integration
def test_a_run_cut_short_resumes_from_its_log(tmp_path):
    out = tmp_path / "front"
    full = run_pareto(MODEL, hardware(), ("energy", "crossbars"), out, settings=SETTINGS,
                      profile=PROFILE)  # fmt: skip
    store = ParetoStore(out)
    lines = store.log_path.read_text().splitlines(keepends=True)
    store.log_path.write_text("".join(lines[:3]) + lines[3][:20])  # three steps and a torn line
    again = run_pareto(MODEL, hardware(), ("energy", "crossbars"), out, settings=SETTINGS,
                       profile=PROFILE)  # fmt: skip
    assert again.resumed == 3 and again.solved == len(full.rows) - 3
    assert values(again) == values(full) and again.complete
