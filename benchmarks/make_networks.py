"""Generate the four benchmark networks (fp32 and int8) into the cache and describe them.

    python benchmarks/make_networks.py [--out-dir DIR] [--networks resnet18 yolov5n] [--force]

Per file it prints: ONNX nodes, operators after ingestion (``load_graph``),
CIM-capable operators, parallel pairs (unordered operator pairs with no path
between them, the set P of the ILP), parameters (folded graph, see
``parameter_count``) next to the published PyTorch count, file size, and the
seconds spent generating it (0 when it was already cached; ``--force``
regenerates). Without ``--out-dir`` the files go to the session cache
(``$PLACEMENT_CACHE`` or ``~/.cache/placement/networks``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import networkx as nx
import onnx

from placement.graph import load_graph
from placement.networks.zoo import (
    NETWORKS,
    PUBLISHED_PARAMETERS,
    cache_file_name,
    default_cache_dir,
    network_path,
    parameter_count,
)


def parallel_pairs(dag: nx.DiGraph) -> int:
    """Unordered pairs of operators that no path connects (|P| of Eq. 10)."""
    closure = nx.transitive_closure_dag(dag)
    n = dag.number_of_nodes()
    comparable = closure.number_of_edges()  # each comparable pair is one closure edge
    return n * (n - 1) // 2 - comparable


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=None, help="default: the cache dir")
    parser.add_argument("--networks", nargs="+", choices=NETWORKS, default=list(NETWORKS))
    parser.add_argument("--force", action="store_true", help="regenerate cached files")
    args = parser.parse_args(argv)
    out_dir = args.out_dir or default_cache_dir()
    print(f"cache: {out_dir}")
    header = (
        f"{'network':<12} {'prec':<5} {'nodes':>6} {'ops':>5} {'cim':>4} {'pairs':>6} "
        f"{'params':>11} {'published':>11} {'MB':>7} {'gen s':>7} {'ingest s':>8}"
    )
    print(header)
    total = 0.0
    for name in args.networks:
        for int8 in (False, True):
            target = out_dir / cache_file_name(name, int8=int8)
            if args.force:
                target.unlink(missing_ok=True)
            t0 = time.perf_counter()
            path = network_path(name, int8=int8, cache_dir=out_dir)
            gen = time.perf_counter() - t0
            total += gen
            model = onnx.load(str(path))
            t0 = time.perf_counter()
            graph = load_graph(path)
            ingest = time.perf_counter() - t0
            print(
                f"{name:<12} {'int8' if int8 else 'fp32':<5} {len(model.graph.node):>6} "
                f"{len(graph.operators):>5} {len(graph.cim_capable()):>4} "
                f"{parallel_pairs(graph.graph):>6} {parameter_count(model):>11,} "
                f"{PUBLISHED_PARAMETERS[name]:>11,} {path.stat().st_size / 1e6:>7.1f} "
                f"{gen:>7.2f} {ingest:>8.2f}",
                flush=True,
            )
    print(f"total generation: {total:.1f} s")


if __name__ == "__main__":
    main()
