"""Reading ONNX files with one-line errors, and the model hash that ties profiles to models."""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from placement.errors import PlacementError

# Random ops: folding one would freeze a single draw into a constant, so neither
# ONNX Runtime nor our ingestion folds them.
NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike"}
    | {"Multinomial", "Bernoulli"}
)


def file_sha256(path: str | Path) -> str:
    """Hash of the file's bytes: a profile is valid only for the exact file it was measured on."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_onnx(path: str | Path) -> onnx.ModelProto:
    """Load an ONNX model (with external data) or raise a one-line PlacementError."""
    path = Path(path)
    if not path.exists():
        raise PlacementError(f"{path}: no such file")
    if path.is_dir():
        raise PlacementError(f"{path}: is a directory, expected an .onnx file")
    try:
        model = onnx.load(str(path))
    except (DecodeError, ValueError, RuntimeError, OSError) as exc:
        raise PlacementError(f"{path}: not a readable ONNX model ({_first_line(exc)})") from None
    except Exception as exc:  # protobuf raises a variety of types on garbage input
        raise PlacementError(f"{path}: not a readable ONNX model ({_first_line(exc)})") from None
    if not model.HasField("graph"):
        raise PlacementError(f"{path}: not a readable ONNX model (no graph)")
    return model


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
