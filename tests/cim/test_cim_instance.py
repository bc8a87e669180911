"""From ONNX + host latencies + hardware to the ILP's data: the paper's numbers per operator."""

import numpy as np
import pytest
from onnx import helper
from onnx_builders import const, conv_model, model, result, save, tensor

from placement.cim.instance import cim_instance
from placement.errors import PlacementError
from placement.graph import load_graph
from placement.hardware.cim import load_hardware, with_overrides

pytestmark = pytest.mark.unit

ARM = load_hardware("arm-a72")


def test_conv_layer_gets_the_hand_computed_crossbars_and_latency(tmp_path):
    # Conv 64 -> 128, 3x3, 56x56 'same': Eq. 1 -> 1 * ceil(576/256) = 3 crossbars;
    # Eqs. 2-3 -> 3136 MVMs * 50 ns + (200704 + 401408) B / 10.24 GB/s
    graph = load_graph(save(conv_model(64, 128, [3, 3], [56, 56]), tmp_path))
    inst = cim_instance(graph, {"conv": 1e-3}, ARM.cim)
    (op,) = inst.operators
    assert op.crossbars == 3
    assert op.t_acc == pytest.approx(3136 * 50e-9 + (200704 + 401408) / 10.24e9)
    assert op.t_host == 1e-3
    assert inst.crossbar_budget == 100


def chain_model(tmp_path):
    # conv -> relu -> conv: two data edges, each carrying the producer's whole output (Eq. 4)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="c1", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["a"], ["b"], name="r"),
        helper.make_node("Conv", ["b", "w2"], ["y"], name="c2", kernel_shape=[1, 1]),
    ]
    weights = [const("w1", np.zeros((8, 4, 1, 1))), const("w2", np.zeros((2, 8, 1, 1)))]
    proto = model(nodes, [tensor("x", [1, 4, 10, 10])], [result("y", 4)], weights)
    return load_graph(save(proto, tmp_path))


def test_edges_carry_eq4_transfers_and_unsupported_ops_have_no_acc_latency(tmp_path):
    graph = chain_model(tmp_path)
    inst = cim_instance(graph, {"c1": 3e-5, "r": 1e-6, "c2": 2e-5}, ARM.cim)
    assert inst.transfer[("c1", "r")] == pytest.approx(8 * 100 / 10.24e9)
    assert inst.transfer[("r", "c2")] == pytest.approx(8 * 100 / 10.24e9)
    relu = inst.by_name["r"]
    assert relu.t_acc is None and relu.crossbars == 0 and not relu.supported
    assert inst.cpu_only_latency == pytest.approx(5.1e-5)


def test_missing_latency_is_an_error(tmp_path):
    graph = chain_model(tmp_path)
    with pytest.raises(PlacementError, match="no latency for operator 'r'"):
        cim_instance(graph, {"c1": 1e-5, "c2": 1e-5}, ARM.cim)


def test_budget_that_fits_nothing(tmp_path):
    graph = load_graph(save(conv_model(64, 512, [3, 3], [8, 8]), tmp_path))  # 2 * 3 = 6 crossbars
    spec = with_overrides(ARM, crossbars=5).cim
    with pytest.raises(PlacementError, match="fits no operator.*'conv', needs 6"):
        cim_instance(graph, {"conv": 1e-3}, spec)


def test_model_without_cim_capable_operators(tmp_path):
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    graph = load_graph(save(model([node], [tensor("x", [1, 4])], [result("y", 2)]), tmp_path))
    with pytest.raises(PlacementError, match="no operator can run on the CIM accelerator"):
        cim_instance(graph, {"relu": 1e-6}, ARM.cim)
