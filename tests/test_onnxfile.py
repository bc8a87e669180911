"""Reading ONNX files: external data is read only from inside the model's directory, and a
model larger than the memory is refused before it is read."""

from __future__ import annotations

import numpy as np
import pytest
from hostile_inputs import external_data_model
from onnx import TensorProto, helper, numpy_helper
from onnx_builders import model, tensor

import placement.onnxfile
from placement.errors import PlacementError
from placement.onnxfile import check_fits_in_memory, read_onnx

W = np.arange(16, dtype=np.float32).reshape(4, 4)


def refused(path, *fragments):
    with pytest.raises(PlacementError) as info:
        read_onnx(path)
    message = str(info.value)
    assert message.startswith(f"{path}: the external data of ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.unit
def test_external_data_in_the_models_directory_is_loaded(tmp_path):
    for location in ("w.bin", "data/w.bin", "data/../w.bin"):  # '..' that stays inside
        directory = tmp_path / location.replace("/", "_")
        data = (directory / location).resolve()
        path = external_data_model(directory, location, data)
        loaded = read_onnx(path)
        assert np.array_equal(numpy_helper.to_array(loaded.graph.initializer[0]), W)


@pytest.mark.unit
def test_a_location_above_the_models_directory_is_refused(tmp_path):
    secret = tmp_path / "secret.bin"  # exists: only the containment check can refuse it
    path = external_data_model(tmp_path / "model", "../secret.bin", secret)
    refused(path, "initializer 'W' at '../secret.bin'", f"resolves to {secret}",
            "outside the model's directory")  # fmt: skip
    path = external_data_model(tmp_path / "deeper", "sub/../../secret.bin")
    refused(path, "'sub/../../secret.bin'", "outside the model's directory")


@pytest.mark.unit
def test_an_absolute_location_is_refused(tmp_path):
    secret = tmp_path / "secret.bin"
    path = external_data_model(tmp_path / "model", str(secret), secret)
    refused(path, f"at '{secret}' is an absolute path")


@pytest.mark.unit
def test_a_symbolic_link_out_of_the_directory_is_refused(tmp_path):
    secret = tmp_path / "secret.bin"
    path = external_data_model(tmp_path / "model", "w.bin", secret)
    (tmp_path / "model" / "w.bin").symlink_to(secret)
    refused(path, "at 'w.bin' resolves to", "outside the model's directory")


@pytest.mark.unit
def test_external_data_of_a_constant_node_is_checked_too(tmp_path):
    secret = tmp_path / "secret.bin"
    path = external_data_model(tmp_path / "model", "../secret.bin", secret, in_constant=True)
    refused(path, "attribute 'value' of node 'w'", "outside the model's directory")


@pytest.mark.unit
def test_external_data_in_a_subgraph_is_checked_too(tmp_path):
    w = numpy_helper.from_array(W, "W")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="../secret.bin")
    branch = helper.make_graph([helper.make_node("Identity", ["W"], ["Z"])], "then", [],
                               [tensor("Z", [4, 4])], [w])  # fmt: skip
    other = helper.make_graph([helper.make_node("Identity", ["X"], ["Z2"])], "else", [],
                              [tensor("Z2", [4, 4])])  # fmt: skip
    node = helper.make_node("If", ["C"], ["Y"], name="branch", then_branch=branch,
                            else_branch=other)  # fmt: skip
    proto = model([node], [tensor("C", [], TensorProto.BOOL), tensor("X", [4, 4])],
                  [tensor("Y", [4, 4])])  # fmt: skip
    (tmp_path / "model").mkdir()
    path = tmp_path / "model" / "if.onnx"
    path.write_bytes(proto.SerializeToString())
    refused(path, "initializer 'W' at '../secret.bin'", "outside the model's directory")


@pytest.mark.unit
def test_a_missing_external_file_is_one_line(tmp_path):
    path = external_data_model(tmp_path / "model", "w.bin")
    refused(path, "at 'w.bin' is missing")


# --------------------------------------------------------------------------- memory


def memory_refused(path, limit, *fragments):
    with pytest.raises(PlacementError) as info:
        read_onnx(path)
    message = str(info.value)
    assert message.startswith(f"{path}: the model takes ") and "\n" not in message
    assert f"more than the {limit / 1e9:.3g} GB of memory available (MemAvailable)" in message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.unit
def test_a_model_larger_than_the_available_memory_is_refused_before_it_is_read(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(placement.onnxfile, "available_memory_bytes", lambda: 50_000)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff" * 100_000)  # not ONNX: reading it would say so
    memory_refused(junk, 50_000, "0.0001 GB with its weights")
    small = tmp_path / "small.onnx"
    small.write_bytes(b"\xff" * 1000)
    with pytest.raises(PlacementError, match="not a readable ONNX model"):
        read_onnx(small)
    monkeypatch.setattr(placement.onnxfile, "available_memory_bytes", lambda: None)
    with pytest.raises(PlacementError, match="not a readable ONNX model"):
        read_onnx(junk)  # unknown: nothing refused


@pytest.mark.unit
def test_external_data_counts_with_the_model_file(tmp_path, monkeypatch):
    data = tmp_path / "model" / "w.bin"
    path = external_data_model(tmp_path / "model", "w.bin", data)
    with data.open("ab") as fh:
        fh.write(bytes(200_000))  # the file counts, not only the 64 bytes of W
    total = path.stat().st_size + data.stat().st_size
    monkeypatch.setattr(placement.onnxfile, "available_memory_bytes", lambda: total - 1)
    for load_weights in (True, False):
        with pytest.raises(PlacementError, match="more than the 0.0002 GB of memory available"):
            read_onnx(path, load_weights=load_weights)
    monkeypatch.setattr(placement.onnxfile, "available_memory_bytes", lambda: total)
    assert np.array_equal(numpy_helper.to_array(read_onnx(path).graph.initializer[0]), W)


@pytest.mark.unit
def test_an_explicit_limit_in_bytes(tmp_path):
    check_fits_in_memory(tmp_path / "m.onnx", 10**9, limit_bytes=10**9)
    with pytest.raises(PlacementError) as info:
        check_fits_in_memory(tmp_path / "m.onnx", 3 * 10**9, limit_bytes=2 * 10**9)
    assert str(info.value) == (
        f"{tmp_path / 'm.onnx'}: the model takes 3 GB with its weights, more than the 2 GB"
        " memory limit: it cannot be profiled here; free memory or use a machine with more"
    )
