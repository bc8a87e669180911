"""The CIM paper's benchmark networks (ResNet-18/50, MobileNetV2, YOLOv5n), built locally.

See :mod:`placement.networks.zoo` for building, quantizing and caching.
"""

from placement.networks.zoo import (
    BUILDER_VERSION,
    NETWORKS,
    PUBLISHED_PARAMETERS,
    build_network,
    default_cache_dir,
    network_path,
    parameter_count,
)

__all__ = [
    "BUILDER_VERSION",
    "NETWORKS",
    "PUBLISHED_PARAMETERS",
    "build_network",
    "default_cache_dir",
    "network_path",
    "parameter_count",
]
