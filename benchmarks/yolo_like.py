"""YOLO-like detectors with anchor-free heads, as ONNX graphs, for the CIM scale benchmark.

Each is built the way ``placement.networks.yolov5`` builds YOLOv5n (its ``Conv``/``C3``/
``SPPF`` modules, folded BN, SiLU as Sigmoid + Mul, 640x640, 80 classes), with the
anchor-free ``Detect`` head of ultralytics YOLOv8 (and of YOLOv5u, which puts that head
on the YOLOv5 backbone), exported as ultralytics' exporter writes it in eval mode: per
level a box branch (Conv 3x3, Conv 3x3, Conv2d 1x1 to 4 x 16) and a class branch (Conv
3x3, Conv 3x3, Conv2d 1x1 to 80) concatenated; the levels flattened and concatenated;
split into box and classes; the DFL (Reshape, Transpose, Softmax, a fixed 1x1 Conv with
weights 0..15, Reshape); dist2bbox (Split, Sub, Add, Add, Div, Sub, Concat); the strides
(Mul); Sigmoid on the classes; one output of 1 x 84 x 8400.

* ``v5u``: YOLOv5nu, the YOLOv5n backbone and neck (C3 blocks) with that head;
* ``v8n``: YOLOv8n (yolov8.yaml at depth 0.33, width 0.25: C2f blocks whose cv1 output
  is split in two and every bottleneck's output is concatenated);
* ``v5u-p2``, ``v8n-p2``: each with a fourth, stride-4 level (as yolov8-p2.yaml: one more
  upsampling step to the stride-4 features, a downsampling step back, and its head).

The neck reads the backbone's P3/P4 (and P2) features across its whole length, so from
the first of them to the output the graph is one block between cut operators: 200+
operators with thousands of parallel pairs. ``instance(name, hardware, ...)`` quantizes
(``placement.networks.zoo.quantize_int8``, as the paper's int8 models) and caches the
model under ``benchmarks/out/`` and builds the CIM instance with a modelled host (presets
``*-model``: no profiling, an estimate).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from placement.networks.yolov5 import _Yolo  # the project's YOLO modules, not a copy

OUT = Path(__file__).resolve().parent / "out"
SIZE = 640
CLASSES = 80
REG_MAX = 16
VARIANTS = ("v5u", "v5u-p2", "v8n", "v8n-p2")


class _AnchorFree(_Yolo):
    def c2f(self, x: str, c1: int, c2: int, n: int, shortcut: bool, p: str) -> str:
        """ultralytics ``C2f``: cv1 to 2c, split in two, n bottlenecks (3x3, 3x3, Add when
        ``shortcut``) each on the last output, cv2 on all of them concatenated."""
        c = c2 // 2
        b, path = self.b, "/" + p.replace(".", "/")
        y = self.conv(x, c1, 2 * c, 1, 1, f"{p}.cv1")
        halves = [f"{path}/Split_output_{k}" for k in range(2)]
        b.nodes.append(onnx.helper.make_node("Split", [y, b.constant([c, c], np.int64)],
                                             halves, name=f"{path}/Split", axis=1))  # fmt: skip
        ys = list(halves)
        for i in range(n):
            q = f"{p}.m.{i}"
            z = self.conv(self.conv(ys[-1], c, c, 3, 1, f"{q}.cv1"), c, c, 3, 1, f"{q}.cv2")
            ys.append(b.add(ys[-1], z, "/" + q.replace(".", "/")) if shortcut else z)
        return self.conv(b.concat(ys, path), (2 + n) * c, c2, 1, 1, f"{p}.cv2")

    def detect(self, feats: list[tuple[str, int, int]], p: str) -> str:
        """The anchor-free head on (feature, channels, stride) levels, decoded."""
        b = self.b
        c2 = max(16, feats[0][1] // 4, 4 * REG_MAX)
        c3 = max(feats[0][1], min(CLASSES, 100))
        flat, anchors, strides = [], [], []
        for i, (x, ch, stride) in enumerate(feats):
            box = self.conv(self.conv(x, ch, c2, 3, 1, f"{p}.cv2.{i}.0"), c2, c2, 3, 1,
                            f"{p}.cv2.{i}.1")  # fmt: skip
            box = b.conv(box, c2, 4 * REG_MAX, 1, name=f"{p}.cv2.{i}.2", bn=False)
            cls = self.conv(self.conv(x, ch, c3, 3, 1, f"{p}.cv3.{i}.0"), c3, c3, 3, 1,
                            f"{p}.cv3.{i}.1")  # fmt: skip
            cls = b.conv(cls, c3, CLASSES, 1, name=f"{p}.cv3.{i}.2", bn=False)
            level = b.concat([box, cls], f"/{p}/level{i}")
            shape = b.constant([1, 4 * REG_MAX + CLASSES, -1], np.int64)
            flat.append(b.node("Reshape", [level, shape], f"/{p}/flat{i}"))
            side = SIZE // stride
            ys, xs = np.meshgrid(np.arange(side) + 0.5, np.arange(side) + 0.5, indexing="ij")
            anchors.append(np.stack([xs.ravel(), ys.ravel()]))
            strides.append(np.full(side * side, float(stride)))
        path = f"/{p}"
        x = b.concat(flat, f"{path}/cat", axis=2)
        parts = [f"{path}/Split_output_{k}" for k in range(2)]
        b.nodes.append(onnx.helper.make_node(
            "Split", [x, b.constant([4 * REG_MAX, CLASSES], np.int64)], parts,
            name=f"{path}/Split", axis=1))  # fmt: skip
        box, cls = parts
        total = sum(a.shape[1] for a in anchors)
        # DFL: a softmax over 16 bins per side, its expectation by a fixed 1x1 conv
        d = b.node("Reshape", [box, b.constant([1, 4, REG_MAX, total], np.int64)], f"{path}/dfl")
        d = b.node("Transpose", [d], f"{path}/dfl", perm=[0, 2, 1, 3])
        d = b.node("Softmax", [d], f"{path}/dfl", axis=1)
        bins = np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1)
        w = b.initializer(f"{p}.dfl.conv.weight", bins)
        d = b.node("Conv", [d, w], f"{path}/dfl/conv", kernel_shape=[1, 1])
        d = b.node("Reshape", [d, b.constant([1, 4, total], np.int64)], f"{path}/dfl_out")
        # dist2bbox (xywh), then the strides
        sides = [f"{path}/dist_Split_output_{k}" for k in range(2)]
        b.nodes.append(onnx.helper.make_node("Split", [d, b.constant([2, 2], np.int64)], sides,
                                             name=f"{path}/dist_Split", axis=1))  # fmt: skip
        lt, rb = sides
        grid = b.initializer(f"{p}.anchors",
                             np.concatenate(anchors, 1)[None].astype(np.float32))  # fmt: skip
        x1y1 = b.node("Sub", [grid, lt], f"{path}/x1y1")
        x2y2 = b.node("Add", [grid, rb], f"{path}/x2y2")
        centre = b.node("Div", [b.node("Add", [x1y1, x2y2], f"{path}/c"), b.constant(2.0)],
                        f"{path}/c")  # fmt: skip
        wh = b.node("Sub", [x2y2, x1y1], f"{path}/wh")
        boxes = b.concat([centre, wh], f"{path}/xywh")
        stride = b.initializer(f"{p}.strides",
                               np.concatenate(strides)[None, None].astype(np.float32))  # fmt: skip
        boxes = b.node("Mul", [boxes, stride], f"{path}/xywh_stride")
        return b.concat([boxes, b.node("Sigmoid", [cls], f"{path}/cls")], f"{path}/out")


def build(variant: str, seed: int = 0) -> onnx.ModelProto:
    """The fp32 model of ``variant`` (one of :data:`VARIANTS`)."""
    m = _AnchorFree(seed, fold_bn=True)
    m.b.name = f"yolo-{variant}"
    x = m.b.input("images", (1, 3, SIZE, SIZE))
    if variant in ("v5u", "v5u-p2"):
        p2, p3, p4, h10 = m.backbone(x)
        h14, o3 = m.top_down(h10, p4, p3)
        levels = []
        if variant == "v5u-p2":
            h = m.conv(o3, 64, 32, 1, 1, "model.p2.0")
            x = m.b.concat([m.b.upsample_nearest(h, 2, "/model.p2.1"), p2], "/model.p2.2")
            o2 = m.c3(x, 64, 32, 1, False, "model.p2.3")
            x = m.b.concat([m.conv(o2, 32, 32, 3, 2, "model.p2.4"), h], "/model.p2.5")
            o3 = m.c3(x, 64, 64, 1, False, "model.p2.6")
            levels.append((o2, 32, 4))
        o4, o5 = m.bottom_up(o3, h14, h10)
        levels += [(o3, 64, 8), (o4, 128, 16), (o5, 256, 32)]
        out = m.detect(levels, "model.24")
    elif variant in ("v8n", "v8n-p2"):
        x = m.conv(x, 3, 16, 3, 2, "model.0")
        x = m.conv(x, 16, 32, 3, 2, "model.1")
        p2 = m.c2f(x, 32, 32, 1, True, "model.2")
        x = m.conv(p2, 32, 64, 3, 2, "model.3")
        p3 = m.c2f(x, 64, 64, 2, True, "model.4")
        x = m.conv(p3, 64, 128, 3, 2, "model.5")
        p4 = m.c2f(x, 128, 128, 2, True, "model.6")
        x = m.conv(p4, 128, 256, 3, 2, "model.7")
        x = m.c2f(x, 256, 256, 1, True, "model.8")
        p5 = m.sppf(x, 256, 256, 5, "model.9")
        x = m.b.concat([m.b.upsample_nearest(p5, 2, "/model.10"), p4], "/model.11")
        h12 = m.c2f(x, 384, 128, 1, False, "model.12")
        x = m.b.concat([m.b.upsample_nearest(h12, 2, "/model.13"), p3], "/model.14")
        h15 = m.c2f(x, 192, 64, 1, False, "model.15")
        levels = []
        if variant == "v8n-p2":
            x = m.b.concat([m.b.upsample_nearest(h15, 2, "/model.16"), p2], "/model.17")
            o2 = m.c2f(x, 96, 32, 1, False, "model.18")
            x = m.b.concat([m.conv(o2, 32, 32, 3, 2, "model.19"), h15], "/model.20")
            h15 = m.c2f(x, 96, 64, 1, False, "model.21")
            levels.append((o2, 32, 4))
        x = m.b.concat([m.conv(h15, 64, 64, 3, 2, "model.22"), h12], "/model.23")
        o4 = m.c2f(x, 192, 128, 1, False, "model.24")
        x = m.b.concat([m.conv(o4, 128, 128, 3, 2, "model.25"), p5], "/model.26")
        o5 = m.c2f(x, 384, 256, 1, False, "model.27")
        levels += [(h15, 64, 8), (o4, 128, 16), (o5, 256, 32)]
        out = m.detect(levels, "model.28")
    else:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    anchors = sum((SIZE // s) ** 2 for _, _, s in levels)
    return m.b.build([(out, "output0", (1, 4 + CLASSES, anchors))])


def model_path(variant: str) -> Path:
    """The int8 (QOperator) model of ``variant``, built and quantized once into OUT."""
    from placement.networks.zoo import quantize_int8

    OUT.mkdir(exist_ok=True)
    int8 = OUT / f"yolo_{variant}_int8.onnx"
    if not int8.exists():
        fp32 = OUT / f"yolo_{variant}_fp32.onnx"
        onnx.save(build(variant), fp32)
        quantize_int8(fp32, int8)
    return int8


def instance(variant: str, hardware: str, crossbars: int, t_mvm_ns: float):
    """The CIM instance of ``variant`` on a ``*-model`` preset (modelled host latencies)."""
    from placement import cim, load_graph, load_hardware

    hw = load_hardware(hardware, crossbars=crossbars, t_mvm_ns=t_mvm_ns)
    return cim.build_instance(load_graph(model_path(variant)), None, hw)
