"""Where host latencies come from, through the CLI (in-process, placement.cli.main):

* ``--hardware arm-a72-model`` takes them from the analytical host model: nothing is
  profiled, and the summary, the JSON, sweep rows and figures say "model"/"estimate";
* a profile measured on x86_64 (``tests/golden/resnet_tiny_int8.profile.json``) used with
  ``--hardware arm-a72`` is a host mismatch: ``solve``, ``export``, ``sweep``, ``bench`` and
  ``report`` say so in a ``placement: warning:`` line and the documents carry
  ``host.mismatch: true`` with both architectures.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import run

import placement.cli.common
import placement.cli.solve
import placement.cli.sweep
from placement.io import file_sha256

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"
PROFILE = ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json"  # measured on x86_64
MISMATCH = "host latencies were measured on x86_64, but hardware 'arm-a72' describes another host"


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("placement: warning:")]


@pytest.fixture
def no_profiling(monkeypatch):
    """Fail the test if anything measures a profile."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("profiled although the host latencies are modelled")

    for module in (placement.cli.common, placement.cli.solve, placement.cli.sweep):
        monkeypatch.setattr(module, "measure_host", refuse, raising=False)


def test_solve_with_the_host_model_needs_no_profile(capsys, tmp_path, no_profiling):
    out_file = tmp_path / "r.json"
    code, out, err = run(
        capsys, "solve", INT8, "--hardware", "arm-a72-model", "--crossbars", "50", "--details",
        "--json", out_file,
    )  # fmt: skip
    assert code == 0, err
    assert "host latencies: modelled for ARM Cortex-A72 (1 core) (estimate)" in out
    assert "CPU-only latency:" in out and "(estimate: host latencies modelled)" in out
    assert "over CPU-only on arm-a72-model, estimate)" in out
    assert "T_host~" in out and "estimated by the analytical host model" in out
    assert "host latencies: modelled by the analytical host model (estimate)" in err
    assert not warnings(err)
    doc = json.loads(out_file.read_text())
    assert doc["host"]["latencies"] == "model" and doc["host"]["estimate"] is True
    assert doc["host"]["mismatch"] is False and doc["host"]["measured_on"] is None
    assert doc["host_profile"] is None
    assert doc["hardware"]["host"]["latency"] == "model"
    assert doc["result"]["status"] == "optimal"


def test_solve_with_a_profile_and_model_hardware_warns_that_the_profile_is_unused(capsys):
    code, _, err = run(capsys, "solve", INT8, "--hardware", "arm-a72-model", "--profile", PROFILE,
                       "--crossbars", "50")  # fmt: skip
    assert code == 0, err
    assert len(warnings(err)) == 1 and "is not used" in warnings(err)[0]


def test_solve_says_the_host_does_not_match(capsys, tmp_path):
    out_file = tmp_path / "r.json"
    code, out, err = run(capsys, "solve", INT8, "--profile", PROFILE, "--hardware", "arm-a72",
                         "--crossbars", "50", "--json", out_file)  # fmt: skip
    assert code == 0, err
    (line,) = warnings(err)
    assert MISMATCH in line and "arm-a72-model" in line
    assert "host latencies: measured on x86_64 but the hardware describes aarch64: mismatch" in out
    assert "MISMATCH" in out
    host = json.loads(out_file.read_text())["host"]
    assert host["mismatch"] is True and host["latencies"] == "measured"
    assert (host["measured_arch"], host["hardware_arch"]) == ("x86_64", "aarch64")
    # the same profile on the x86 preset: no warning, measured on this kind of host
    code, out, err = run(capsys, "solve", INT8, "--profile", PROFILE, "--hardware", "x86-ryzen",
                         "--crossbars", "50", "--json", out_file)  # fmt: skip
    assert code == 0 and not warnings(err)
    assert json.loads(out_file.read_text())["host"]["mismatch"] is False


def test_export_says_the_host_does_not_match(capsys, tmp_path):
    out_file = tmp_path / "m.lp"
    code, _, err = run(capsys, "export", INT8, "--profile", PROFILE, "--hardware", "arm-a72",
                       "-o", out_file)  # fmt: skip
    assert code == 0, err
    assert len(warnings(err)) == 1 and MISMATCH in warnings(err)[0]
    sidecar = json.loads(Path(f"{out_file}.json").read_text())
    assert sidecar["host"]["mismatch"] is True


def test_sweep_warns_once_per_model_and_hardware_and_labels_rows(capsys, tmp_path):
    out_dir = tmp_path / "sweep"
    # The golden profile, with the warning a profile measured on a busy machine records.
    profile = json.loads(PROFILE.read_text())
    unstable = "host latencies may not be reproducible: the total varied by 31 % between rounds"
    profile["metadata"]["warnings"] = [unstable]
    noisy = tmp_path / "noisy.profile.json"
    noisy.write_text(json.dumps(profile))
    code, out, err = run(
        capsys, "sweep", INT8, "--profile", noisy,
        "--hardware", "arm-a72,x86-ryzen,arm-a72-model",
        "--crossbars", "8,50", "--t-mvm-ns", "100", "--workers", "1", "-o", out_dir,
    )  # fmt: skip
    assert code == 0, err
    (line,) = [w for w in warnings(err) if "resnet_tiny_int8 on" in w]  # once for 2 points
    assert "resnet_tiny_int8 on arm-a72:" in line and MISMATCH in line
    with (out_dir / "points.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6
    by_hw = {r["hardware"]: r for r in rows}
    assert by_hw["arm-a72"]["host_mismatch"] == "true"
    assert by_hw["arm-a72"]["host_latencies"].endswith("describes aarch64: mismatch")
    assert by_hw["x86-ryzen"]["host_mismatch"] == "false"
    assert by_hw["x86-ryzen"]["host_latencies"].startswith("measured on x86_64")
    modelled = by_hw["arm-a72-model"]["host_latencies"]
    assert modelled == "modelled for ARM Cortex-A72 (1 core) (estimate)"
    for r in rows:
        doc = json.loads((out_dir / "schedules" / f"{r['point_id']}.json").read_text())
        assert doc["host"]["mismatch"] is (r["hardware"] == "arm-a72")
        assert doc["host"]["estimate"] is (r["hardware"] == "arm-a72-model")
    # a heading per model and hardware says where its host latencies came from
    headings = {ln.split(" on ", 1)[1].split(":")[0]: ln for ln in out.splitlines()
                if ln.startswith("resnet_tiny_int8 on ")}  # fmt: skip
    assert headings["arm-a72"].endswith("describes aarch64: mismatch")
    assert headings["arm-a72-model"].endswith("(estimate)")
    assert "measured on x86_64" in headings["x86-ryzen"]
    assert "mismatch" not in headings["x86-ryzen"]

    # report: a warning line, and the page states every profile's and hardware's host
    page = tmp_path / "report.md"
    code, out, err = run(capsys, "report", out_dir, "-o", page)
    assert code == 0, err
    # the architecture mismatch, the other CPU (an Intel Xeon is no Ryzen, though both
    # are x86_64) and the profile's own warning: on the page and as warning lines
    mismatch, other_cpu, unstable_line = sorted(warnings(err), key=lambda w: (
        MISMATCH not in w, "x86-ryzen" not in w))  # fmt: skip
    assert "resnet_tiny_int8 on arm-a72:" in mismatch and MISMATCH in mismatch
    assert "resnet_tiny_int8 on x86-ryzen: host latencies were measured on Intel(R) Xeon(R)" \
           " Processor, but hardware 'x86-ryzen' names AMD Ryzen 9 3900X" in other_cpu
    assert "(profiles/resnet_tiny_int8." in unstable_line and unstable in unstable_line
    text = page.read_text()
    assert "## Host latencies" in text and "**Host mismatch:**" in text
    assert "**Other CPU:**" in text and "**Profile:** resnet_tiny_int8" in text
    assert "| resnet_tiny_int8 | x86_64 (Intel(R) Xeon(R) Processor) | arm-a72 |" in text
    assert "| MISMATCH: other architecture |" in text and "| estimate |" in text
    assert "| other CPU, same architecture |" in text


def test_sweep_of_model_hardware_only_profiles_nothing(capsys, tmp_path, no_profiling):
    out_dir = tmp_path / "sweep"
    code, out, err = run(capsys, "sweep", INT8, "--hardware", "arm-a72-model,x86-ryzen-model",
                         "--crossbars", "50", "--workers", "1", "-o", out_dir)  # fmt: skip
    assert code == 0, err
    assert "nothing is profiled" in err and not warnings(err)
    assert not (out_dir / "profiles").exists() or not any((out_dir / "profiles").iterdir())
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert [m["profile"] for m in manifest["models"]] == [None]
    rows = json.loads((out_dir / "points.json").read_text())
    assert {r["hardware"]: r["host_latencies"].endswith("(estimate)") for r in rows} == {
        "arm-a72-model": True, "x86-ryzen-model": True,
    }  # fmt: skip
    assert all(r["status"] == "optimal" and r["speedup"] > 1 for r in rows)


def test_bench_warns_once_per_network_and_hardware(capsys, tmp_path):
    out_dir = tmp_path / "bench"
    cached = out_dir / "profiles" / f"resnet_tiny_int8-{file_sha256(INT8)[:12]}.json"
    cached.parent.mkdir(parents=True)
    shutil.copyfile(PROFILE, cached)  # bench reuses it: nothing is measured
    code, _, err = run(
        capsys, "bench", INT8, "--grid", "8,50x100", "--formulations", "bounded",
        "--solvers", "highs", "--solver-threads", "1", "--hardware", "arm-a72,arm-a72-model",
        "-o", out_dir,
    )  # fmt: skip
    assert code == 0, err
    (line,) = warnings(err)  # two grid points on arm-a72, one warning
    assert "resnet_tiny_int8 on arm-a72:" in line and MISMATCH in line
    rows = json.loads((out_dir / "runs.json").read_text())
    assert len(rows) == 4
    for r in rows:
        assert r["host_mismatch"] is (r["hardware"] == "arm-a72")
        assert ("(estimate)" in r["host_latencies"]) is (r["hardware"] == "arm-a72-model")
