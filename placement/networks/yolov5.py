"""YOLOv5n, ultralytics/yolov5 v6.0 layout (yolov5n.yaml), 640x640, 80 classes.

Scaling: depth multiple 0.33 (C3 repeats 3/6/9 -> 1/2/3), width multiple 0.25
(64..1024 channels -> 16..256). ``Conv`` = Conv2d(bias=False) + BN + SiLU,
padding k//2 unless given. ``C3(c1, c2, n, shortcut)``: cv1, cv2 = 1x1 to
c2/2 in parallel, n Bottlenecks (1x1 then 3x3, Add when shortcut) on the cv1
path, Concat(m, cv2), cv3 1x1 to c2. ``SPPF(k=5)``: cv1 1x1 to c1/2, three
chained MaxPool 5/1/2, Concat of the four, cv2 1x1.

Layers (index: module, channels)::

    0 Conv 6x6/2 p2 16   1 Conv 3x3/2 32   2 C3 n=1   3 Conv /2 64   4 C3 n=2
    5 Conv /2 128        6 C3 n=3          7 Conv /2 256            8 C3 n=1   9 SPPF
    10 Conv 1x1 128  11 Upsample  12 Concat(-1, 6)  13 C3 n=1 no-shortcut (128)
    14 Conv 1x1 64   15 Upsample  16 Concat(-1, 4)  17 C3 (64)   P3/8
    18 Conv 3x3/2 64 19 Concat(-1, 14)              20 C3 (128)  P4/16
    21 Conv 3x3/2 128 22 Concat(-1, 10)             23 C3 (256)  P5/32
    24 Detect: 1x1 conv with bias to 3 * (80 + 5) = 255 channels on 17, 20, 23

The architecture (and so every weight shape) is v6.0's; yolov5n.yaml did not
change through v7.0. The Detect head's eval-mode decoding is written as the
exporter writes it (static shapes, ``inplace`` off, grids precomputed by the
exporter's dry run, so they are constants). Per level: conv, ``view`` ->
Reshape (1,3,85,ny,nx), ``permute`` -> Transpose (1,3,ny,nx,85), Sigmoid, box
decoding, ``view(1, -1, 85)``; a final Concat gives (1, 25200, 85).

* ``export="v7.0"`` (default; the exporter of v6.2 to v7.0 and current
  ultralytics): ``xy, wh, conf = y.split((2, 2, 81), 4)``, ``xy = (xy * 2 +
  grid) * stride``, ``wh = (wh * 2) ** 2 * anchor_grid``, one output
  ``output0``. 236 fp32 nodes; 245 int8 QOperator nodes, exactly the count
  the project's notes report for a real int8 export (paper: 251 operators).
* ``export="v6.0"``: three Slices and a Sub instead of the Split
  (``xy = (y[..., 0:2] * 2 - 0.5 + grid) * stride``), and the three permuted
  raw head tensors are extra outputs (v6.0's ``Detect`` returned
  ``(cat(z), x)``). 245 fp32 nodes but 275 int8 nodes: ONNX Runtime does not
  quantize Slice and Sub, so each gets Dequantize/Quantize pairs.

The full head is kept (not cut at the three convs) because a real export
contains it, and with it the int8 node count matches the real export's.

Published parameter count: 1,872,157 (``model.info()`` for 80 classes).
"""

from __future__ import annotations

import numpy as np
import onnx

from placement.networks.builder import GraphBuilder

INPUT_SHAPE = (1, 3, 640, 640)
NUM_CLASSES = 80
NUM_OUTPUTS = NUM_CLASSES + 5  # x, y, w, h, objectness, classes
ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))
STRIDES = (8, 16, 32)
NUM_ANCHORS = 3
EXPORTS = ("v7.0", "v6.0")


class _Yolo:
    def __init__(self, seed: int, fold_bn: bool) -> None:
        self.b = GraphBuilder("yolov5n", seed=seed, fold_bn=fold_bn)

    def conv(self, x: str, c1: int, c2: int, k: int, s: int, p: str, pad: int | None = None) -> str:
        """ultralytics ``Conv``: Conv2d + BN (folded) + SiLU."""
        y = self.b.conv(x, c1, c2, k, stride=s, pad=pad, name=f"{p}.conv")
        return self.b.silu(y, "/" + p.replace(".", "/") + "/act")

    def c3(self, x: str, c1: int, c2: int, n: int, shortcut: bool, p: str) -> str:
        c_ = c2 // 2
        y = self.conv(x, c1, c_, 1, 1, f"{p}.cv1")
        for i in range(n):
            q = f"{p}.m.{i}"
            z = self.conv(self.conv(y, c_, c_, 1, 1, f"{q}.cv1"), c_, c_, 3, 1, f"{q}.cv2")
            y = self.b.add(y, z, "/" + q.replace(".", "/")) if shortcut else z
        y2 = self.conv(x, c1, c_, 1, 1, f"{p}.cv2")
        cat = self.b.concat([y, y2], "/" + p.replace(".", "/"))
        return self.conv(cat, 2 * c_, c2, 1, 1, f"{p}.cv3")

    def sppf(self, x: str, c1: int, c2: int, k: int, p: str) -> str:
        c_ = c1 // 2
        path = "/" + p.replace(".", "/")
        x = self.conv(x, c1, c_, 1, 1, f"{p}.cv1")
        y1 = self.b.maxpool(x, k, 1, k // 2, f"{path}/m")
        y2 = self.b.maxpool(y1, k, 1, k // 2, f"{path}/m_1")
        y3 = self.b.maxpool(y2, k, 1, k // 2, f"{path}/m_2")
        return self.conv(self.b.concat([x, y1, y2, y3], path), 4 * c_, c2, 1, 1, f"{p}.cv2")

    def backbone(self, x: str) -> tuple[str, str, str, str]:
        """YOLOv5n's backbone, SPPF and first neck conv (model.0-10) on the input ``x``:
        the stride-4, -8 and -16 features (model.2, 4, 6) and model.10's output."""
        x = self.conv(x, 3, 16, 6, 2, "model.0", pad=2)
        x = self.conv(x, 16, 32, 3, 2, "model.1")
        p2 = self.c3(x, 32, 32, 1, True, "model.2")
        x = self.conv(p2, 32, 64, 3, 2, "model.3")
        p3 = self.c3(x, 64, 64, 2, True, "model.4")
        x = self.conv(p3, 64, 128, 3, 2, "model.5")
        p4 = self.c3(x, 128, 128, 3, True, "model.6")
        x = self.conv(p4, 128, 256, 3, 2, "model.7")
        x = self.c3(x, 256, 256, 1, True, "model.8")
        x = self.sppf(x, 256, 256, 5, "model.9")
        return p2, p3, p4, self.conv(x, 256, 128, 1, 1, "model.10")

    def top_down(self, h10: str, p4: str, p3: str) -> tuple[str, str]:
        """The neck's top-down path (model.11-17): model.14's output and the P3 output."""
        x = self.b.upsample_nearest(h10, 2, "/model.11")
        x = self.b.concat([x, p4], "/model.12")
        x = self.c3(x, 256, 128, 1, False, "model.13")
        h14 = self.conv(x, 128, 64, 1, 1, "model.14")
        x = self.b.upsample_nearest(h14, 2, "/model.15")
        x = self.b.concat([x, p3], "/model.16")
        return h14, self.c3(x, 128, 64, 1, False, "model.17")

    def bottom_up(self, out_p3: str, h14: str, h10: str) -> tuple[str, str]:
        """The neck's bottom-up path (model.18-23): the P4 and P5 outputs."""
        x = self.conv(out_p3, 64, 64, 3, 2, "model.18")
        x = self.b.concat([x, h14], "/model.19")
        out_p4 = self.c3(x, 128, 128, 1, False, "model.20")
        x = self.conv(out_p4, 128, 128, 3, 2, "model.21")
        x = self.b.concat([x, h10], "/model.22")
        return out_p4, self.c3(x, 256, 256, 1, False, "model.23")

    def detect_level(self, x: str, c_in: int, i: int, export: str) -> tuple[str, str]:
        """One Detect level: conv, reshape/permute (raw output), sigmoid and box decoding."""
        b, no, na = self.b, NUM_OUTPUTS, NUM_ANCHORS
        ny = nx = INPUT_SHAPE[2] // STRIDES[i]
        path = f"/model.24/det{i}"  # torch would number these /model.24/Mul_7 etc.
        x = b.conv(x, c_in, na * no, 1, name=f"model.24.m.{i}", bn=False)
        x = b.node("Reshape", [x, b.constant([1, na, no, ny, nx], np.int64)], path)
        raw = b.node("Transpose", [x], path, perm=[0, 1, 3, 4, 2])
        y = b.node("Sigmoid", [raw], path)
        # Grids: constants that the exporter's dry run stores on the module and the
        # trace freezes. v6.2+ folds the -0.5 of the xy decoding into the grid.
        yv, xv = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
        grid = np.broadcast_to(np.stack((xv, yv), 2), (1, na, ny, nx, 2)).astype(np.float32)
        if export == "v7.0":
            grid = grid - np.float32(0.5)
        anchors = np.asarray(ANCHORS[i], np.float32).reshape(1, na, 1, 1, 2)
        anchor_grid = np.broadcast_to(anchors, (1, na, ny, nx, 2)).astype(np.float32)
        grid_name = b.initializer(f"model.24.grid.{i}", grid)
        anchor_name = b.initializer(f"model.24.anchor_grid.{i}", anchor_grid)
        two = b.constant(2.0)
        if export == "v7.0":
            # xy, wh, conf = y.split((2, 2, nc + 1), 4); xy = (xy * 2 + grid) * stride
            sizes = b.constant([2, 2, NUM_CLASSES + 1], np.int64)
            split = f"{path}/Split"
            outs = [f"{split}_output_{k}" for k in range(3)]
            b.nodes.append(
                onnx.helper.make_node("Split", [y, sizes], outs, name=split, axis=4)
            )
            xy, wh, conf = outs
            xy = b.node("Mul", [xy, two], f"{path}/xy")
        else:
            # xy = (y[..., 0:2] * 2 - 0.5 + grid) * stride, via three Slices
            def last_axis(start: int, end: int, tag: str) -> str:
                bounds = [b.constant([v], np.int64) for v in (start, end)]
                return b.node("Slice", [y, *bounds, b.constant([4], np.int64)], f"{path}/{tag}")

            xy, wh = last_axis(0, 2, "xy"), last_axis(2, 4, "wh")
            conf = last_axis(4, int(np.iinfo(np.int64).max), "conf")
            xy = b.node("Mul", [xy, two], f"{path}/xy")
            xy = b.node("Sub", [xy, b.constant(0.5)], f"{path}/xy")
        xy = b.node("Add", [xy, grid_name], f"{path}/xy")
        xy = b.node("Mul", [xy, b.constant(float(STRIDES[i]))], f"{path}/xy_stride")
        wh = b.node("Mul", [wh, two], f"{path}/wh")
        wh = b.node("Pow", [wh, two], f"{path}/wh")
        wh = b.node("Mul", [wh, anchor_name], f"{path}/wh_anchor")
        y = b.concat([xy, wh, conf], path, axis=-1)
        y = b.node("Reshape", [y, b.constant([1, -1, no], np.int64)], f"{path}/out")
        return raw, y


def build_yolov5n(
    *, seed: int = 0, fold_bn: bool = True, export: str = "v7.0"
) -> onnx.ModelProto:
    """YOLOv5n; ``export`` picks the Detect head as that release's exporter writes it."""
    if export not in EXPORTS:
        raise ValueError(f"export must be one of {EXPORTS}, got {export!r}")
    m = _Yolo(seed, fold_bn)
    x = m.b.input("images", INPUT_SHAPE)
    _, p3, p4, h10 = m.backbone(x)
    h14, out_p3 = m.top_down(h10, p4, p3)
    out_p4, out_p5 = m.bottom_up(out_p3, h14, h10)
    raws, decoded = [], []
    for i, (feat, c) in enumerate(((out_p3, 64), (out_p4, 128), (out_p5, 256))):
        raw, y = m.detect_level(feat, c, i, export)
        raws.append(raw)
        decoded.append(y)
    out = m.b.concat(decoded, "/model.24", axis=1)
    n_boxes = sum(NUM_ANCHORS * (INPUT_SHAPE[2] // s) ** 2 for s in STRIDES)
    outputs = [(out, "output0" if export == "v7.0" else "output", (1, n_boxes, NUM_OUTPUTS))]
    for i, raw in enumerate(raws if export == "v6.0" else []):
        g = INPUT_SHAPE[2] // STRIDES[i]
        outputs.append((raw, f"head{i}", (1, NUM_ANCHORS, g, g, NUM_OUTPUTS)))
    return m.b.build(outputs)
