"""MobileNetV2 (Sandler et al. 2018) as torchvision defines it, width 1.0, 224x224, 1000 classes.

features.0: Conv 3x3/2 (32) + BN + ReLU6; then inverted residual blocks
(t, c, n, s) = (1,16,1,1) (6,24,2,2) (6,32,3,2) (6,64,4,2) (6,96,3,1)
(6,160,3,2) (6,320,1,1): 1x1 expand (skipped when t = 1), 3x3 depthwise,
1x1 linear projection, residual Add when stride 1 and in == out channels;
features.18: Conv 1x1 (1280) + BN + ReLU6; GlobalAveragePool, Flatten,
Dropout (an identity in eval mode, so not exported), Linear(1280, 1000).
Published parameter count: 3,504,872.
"""

from __future__ import annotations

import onnx

from placement.networks.builder import GraphBuilder

INPUT_SHAPE = (1, 3, 224, 224)
NUM_CLASSES = 1000
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
            (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip
LAST_CHANNEL = 1280
RESIDUAL_GAIN = 0.5  # init gain of the projection conv of a residual block


def _conv_bn_relu6(b: GraphBuilder, x: str, c_in: int, c_out: int, k: int, p: str,
                   stride: int = 1, groups: int = 1) -> str:  # fmt: skip
    y = b.conv(x, c_in, c_out, k, stride=stride, groups=groups, name=f"{p}.0")
    return b.relu6(y, "/" + p.replace(".", "/") + "/2")


def build_mobilenetv2(*, seed: int = 0, fold_bn: bool = True) -> onnx.ModelProto:
    b = GraphBuilder("mobilenetv2", seed=seed, fold_bn=fold_bn)
    x = b.input("input", INPUT_SHAPE)
    x = _conv_bn_relu6(b, x, 3, 32, 3, "features.0", stride=2)
    c_in, index = 32, 1
    for t, c, n, s in SETTINGS:
        for i in range(n):
            stride = s if i == 0 else 1
            p = f"features.{index}.conv"
            hidden = c_in * t
            y, j = x, 0
            if t != 1:
                y = _conv_bn_relu6(b, y, c_in, hidden, 1, f"{p}.0")
                j = 1
            y = _conv_bn_relu6(b, y, hidden, hidden, 3, f"{p}.{j}", stride=stride, groups=hidden)
            residual = stride == 1 and c_in == c
            gain = RESIDUAL_GAIN if residual else 1.0  # linear bottleneck: no ReLU gain
            y = b.conv(y, hidden, c, 1, name=f"{p}.{j + 1}", gain=gain)
            x = b.add(x, y, f"/features/features.{index}") if residual else y
            c_in, index = c, index + 1
    x = _conv_bn_relu6(b, x, c_in, LAST_CHANNEL, 1, f"features.{index}")
    x = b.node("GlobalAveragePool", [x], "")
    x = b.node("Flatten", [x], "", axis=1)
    logits = b.linear(x, LAST_CHANNEL, NUM_CLASSES, name="classifier.1")
    return b.build([(logits, "output", (1, NUM_CLASSES))])
