"""Bad input end to end. Inputs that try to do more than describe a model -- a .mlir
calling outside itself, ONNX external data outside the model's directory -- and a bad
Dask scheduler address: each is one line on stderr, exit 1, no traceback, nothing
written and nothing run. A machine without the cache simulator or a C compiler: one
line naming the package to install, and profiling without them still works."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run
from hostile_inputs import HOSTILE_MLIR, external_data_model, program

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"
FAST = ["--runs", "1", "--warmup", "0", "--min-seconds", "0", "--counters-source", "none"]


def assert_only_one_line(code: int, err: str, *fragments: str) -> None:
    """The error line, and nothing else on stderr (no progress before it)."""
    assert_one_line_error(code, err, *fragments)
    assert len(err.strip().splitlines()) == 1, err


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory and a private temporary directory, to see what is left."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def left_on_disk(directory: Path, inputs: set[str]) -> list[str]:
    names = {str(p.relative_to(directory)) for p in directory.rglob("*")}
    return sorted(names - inputs - {"tmp"})


@pytest.mark.integration
@pytest.mark.parametrize("name", ["external func.func", "llvm.func and llvm.call",
                                  "inline assembly", "memref.global"])  # fmt: skip
def test_a_mlir_reaching_outside_itself_is_refused_before_anything_runs(capsys, workdir, name):
    pytest.importorskip("torch_mlir")
    text, fragment = HOSTILE_MLIR[name]
    (workdir / "attack.mlir").write_text(text)
    commands = [
        ("solve", "attack.mlir", "--target", "pim", *FAST, "--json", "out.json"),
        ("profile", "attack.mlir", "--target", "pim", *FAST, "-o", "out.nests.json"),
        ("nests", "attack.mlir"),
    ]
    for argv in commands:
        code, out, err = run(capsys, *argv)
        assert_only_one_line(code, err, "attack.mlir: line ", fragment)
        assert out == ""
    assert left_on_disk(workdir, {"attack.mlir"}) == []


@pytest.mark.integration
def test_onnx_external_data_outside_the_models_directory_is_refused(capsys, workdir):
    secret = workdir / "secret.bin"
    external_data_model(workdir / "model", "../secret.bin", secret)
    inputs = {"secret.bin", "model", "model/model.onnx"}
    for argv in (("solve", "model/model.onnx", "--target", "cim", "--json", "out.json"),
                 ("profile", "model/model.onnx", "-o", "out.profile.json")):  # fmt: skip
        code, out, err = run(capsys, *argv)
        assert_only_one_line(code, err, "external data of initializer 'W' at '../secret.bin'",
                              "outside the model's directory")  # fmt: skip
    assert left_on_disk(workdir, inputs) == []


def sweep_in_subprocess(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    # A new interpreter: a half-made Dask client would print when the process exits.
    return subprocess.run(
        [sys.executable, "-m", "placement.cli", "sweep", str(INT8), "--target", "cim",
         "--crossbars", "10", "-o", str(tmp_path / "sweep"), *extra],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
        env=dict(os.environ),
    )  # fmt: skip


@pytest.mark.integration
def test_a_scheduler_address_that_is_not_one_is_one_line_and_nothing_after(tmp_path):
    run = sweep_in_subprocess(tmp_path, "--scheduler", "not a url")
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "placement: error: --scheduler 'not a url' is not a scheduler address"
        " (e.g. tcp://scheduler-host:8786)"
    ]
    assert not (tmp_path / "sweep").exists()


@pytest.mark.integration
def test_a_scheduler_that_does_not_answer_is_one_line_and_nothing_after(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on (bound, then released)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = sweep_in_subprocess(tmp_path, "--scheduler", f"127.0.0.1:{port}",
                              "--scheduler-timeout", "1")  # fmt: skip
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(
        f"placement: error: cannot connect to the Dask scheduler at tcp://127.0.0.1:{port}"
        " within 1 s"
    )
    assert not (tmp_path / "sweep").exists()


@pytest.mark.integration
def test_a_service_that_is_not_a_scheduler_is_named_so(tmp_path):
    """Something else listening (here: an HTTP-like reply) is not reported as the
    exabyte allocation distributed attempts when it decodes the reply as a frame."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def answer() -> None:
        with server:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 8)

    threading.Thread(target=answer, daemon=True).start()
    try:
        run = sweep_in_subprocess(tmp_path, "--scheduler", f"127.0.0.1:{port}",
                                  "--scheduler-timeout", "3")  # fmt: skip
    finally:
        server.close()
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        f"placement: error: cannot connect to the Dask scheduler at tcp://127.0.0.1:{port}"
        " within 3 s (something answered there, but not in Dask's protocol); check"
        " --scheduler, or raise --scheduler-timeout"
    ]
    assert not (tmp_path / "sweep").exists()


@pytest.mark.integration
def test_without_valgrind_and_gcc_one_line_names_the_package_and_the_rest_works(tmp_path):
    pytest.importorskip("torch_mlir")
    (tmp_path / "prog.mlir").write_text(program())
    (tmp_path / "empty-bin").mkdir()
    env = dict(os.environ, PATH=str(tmp_path / "empty-bin"),  # no valgrind, gcc or cc
               XDG_CACHE_HOME=str(tmp_path / "cache"))  # no C marker library built before

    def profile(source: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "placement.cli", "profile", "prog.mlir", "--target", "pim",
             "--runs", "1", "--warmup", "0", "--counters-source", source,
             "-o", f"{source}.nests.json"],
            capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path, env=env,
        )  # fmt: skip

    simulated = profile("simulated")
    errors = [ln for ln in simulated.stderr.splitlines() if ln.startswith("placement: error:")]
    assert simulated.returncode == 1 and "Traceback" not in simulated.stderr
    assert errors == [
        "placement: error: --counters-source simulated: the cache simulator valgrind is not"
        " installed (install the package `valgrind`, e.g. apt-get install valgrind)"
    ]
    assert not (tmp_path / "simulated.nests.json").exists()
    for source in ("auto", "none"):  # times still measured, with Python markers
        done = profile(source)
        assert done.returncode == 0, done.stderr
        assert "install the Debian package gcc" in done.stderr
        assert (tmp_path / f"{source}.nests.json").exists()
