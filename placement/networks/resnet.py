"""ResNet-18 and ResNet-50 as torchvision defines them (He et al. 2016; torchvision v1.5 layout).

224x224 input, 1000 classes. Stem: Conv 7x7/2 (64) - ReLU - MaxPool 3x3/2.
ResNet-18: BasicBlocks [2, 2, 2, 2]; ResNet-50: Bottlenecks [3, 4, 6, 3]
with expansion 4 and the stride on the 3x3 conv (torchvision's "v1.5").
The first block of a stage gets a 1x1 conv + BN downsample when the stride
or width changes. Head: GlobalAveragePool - Flatten - Gemm.
Published parameter counts: 11,689,512 and 25,557,032.
"""

from __future__ import annotations

import onnx

from placement.networks.builder import GraphBuilder

INPUT_SHAPE = (1, 3, 224, 224)
NUM_CLASSES = 1000
RESIDUAL_GAIN = 0.5  # init gain of a branch's last conv: keeps activations bounded without BN


def _basic_block(b: GraphBuilder, x: str, c_in: int, c: int, stride: int, p: str) -> str:
    path = "/" + p.replace(".", "/")
    y = b.relu(b.conv(x, c_in, c, 3, stride=stride, name=f"{p}.conv1"), f"{path}/relu")
    y = b.conv(y, c, c, 3, name=f"{p}.conv2", gain=RESIDUAL_GAIN)
    if stride != 1 or c_in != c:
        x = b.conv(x, c_in, c, 1, stride=stride, pad=0, name=f"{p}.downsample.0")
    return b.relu(b.add(y, x, path), f"{path}/relu_1")


def _bottleneck(b: GraphBuilder, x: str, c_in: int, width: int, stride: int, p: str) -> str:
    c_out = width * 4
    path = "/" + p.replace(".", "/")
    y = b.relu(b.conv(x, c_in, width, 1, pad=0, name=f"{p}.conv1"), f"{path}/relu")
    y = b.relu(b.conv(y, width, width, 3, stride=stride, name=f"{p}.conv2"), f"{path}/relu_1")
    y = b.conv(y, width, c_out, 1, pad=0, name=f"{p}.conv3", gain=RESIDUAL_GAIN)
    if stride != 1 or c_in != c_out:
        x = b.conv(x, c_in, c_out, 1, stride=stride, pad=0, name=f"{p}.downsample.0")
    return b.relu(b.add(y, x, path), f"{path}/relu_2")


def _resnet(name: str, bottleneck: bool, blocks: tuple[int, ...], seed: int, fold_bn: bool):
    b = GraphBuilder(name, seed=seed, fold_bn=fold_bn)
    x = b.input("input", INPUT_SHAPE)
    x = b.relu(b.conv(x, 3, 64, 7, stride=2, pad=3, name="conv1"), "/relu")
    x = b.maxpool(x, 3, 2, 1, "/maxpool")
    c_in = 64
    for stage, n in enumerate(blocks):
        width = 64 * 2**stage
        for i in range(n):
            stride = 2 if stage > 0 and i == 0 else 1
            p = f"layer{stage + 1}.{i}"
            if bottleneck:
                x = _bottleneck(b, x, c_in, width, stride, p)
                c_in = width * 4
            else:
                x = _basic_block(b, x, c_in, width, stride, p)
                c_in = width
    x = b.node("GlobalAveragePool", [x], "/avgpool")
    x = b.node("Flatten", [x], "", axis=1)
    logits = b.linear(x, c_in, NUM_CLASSES, name="fc")
    return b.build([(logits, "output", (1, NUM_CLASSES))])


def build_resnet18(*, seed: int = 0, fold_bn: bool = True) -> onnx.ModelProto:
    return _resnet("resnet18", False, (2, 2, 2, 2), seed, fold_bn)


def build_resnet50(*, seed: int = 0, fold_bn: bool = True) -> onnx.ModelProto:
    return _resnet("resnet50", True, (3, 4, 6, 3), seed, fold_bn)
