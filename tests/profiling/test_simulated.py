"""Simulated counters (placement.profiling.simulated): geometry, tool checks, and the cache
simulation against closed forms.

The closed-form cases run real callgrind simulations on small programs written at the
linalg-on-tensors level (so the loop order is known), with small explicit caches so that
each run takes about a second: D1 8 KiB 4-way, LL 64 KiB 8-way (or 32 KiB for the GEMM),
64 B lines. Off-core read bytes are the simulated LL read misses x 64 B.
"""

from __future__ import annotations

import shutil

import pytest

from placement.errors import PlacementError
from placement.profiling import counters as counters_mod
from placement.profiling.cache_geometry import (
    Cache,
    host_cache_geometry,
    parse_cache,
    parse_overrides,
)
from placement.profiling.counters import (
    SIM_INSTRUCTIONS,
    SIM_LL_READ_MISSES,
    SIM_LL_WRITE_MISSES,
    SIM_OFFCORE_READ_BYTES,
    SIMULATED_EVENTS,
    CountersUnavailable,
    select_source,
)
from placement.profiling.simulated import parse_dump

LINE = 64
SMALL = "D1=8K,4,64 LL=64K,8,64"
HAVE_SIMULATOR = shutil.which("valgrind") is not None and shutil.which("gcc") is not None
needs_simulator = pytest.mark.skipif(not HAVE_SIMULATOR, reason="valgrind or gcc not installed")


# --------------------------------------------------------------------------- geometry


def fake_sysfs(root, caches):
    """caches: (level, type, size, ways, line, shared_cpu_list) per index."""
    cpu = root / "cpu0" / "cache"
    for i, (level, kind, size, ways, line, shared) in enumerate(caches):
        d = cpu / f"index{i}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size),
                            ("ways_of_associativity", ways), ("coherency_line_size", line),
                            ("shared_cpu_list", shared)):  # fmt: skip
            (d / name).write_text(f"{value}\n")
    return cpu


@pytest.mark.unit
def test_geometry_takes_l1_and_the_last_private_cache_from_sysfs(tmp_path):
    root = fake_sysfs(tmp_path, [
        (1, "Data", "48K", 12, 64, "0"), (1, "Instruction", "32K", 8, 64, "0"),
        (2, "Unified", "2048K", 16, 64, "0"), (3, "Unified", "307200K", 20, 64, "0-1"),
    ])  # fmt: skip
    g = host_cache_geometry(root, overrides="")
    assert (g.d1, g.i1, g.ll) == (Cache(48 << 10, 12, 64), Cache(32 << 10, 8, 64),
                                  Cache(2 << 20, 16, 64))  # fmt: skip
    assert g.ll_level == "L2 (private to cpu0)" and g.source == "sysfs" and not g.notes
    assert g.options() == ["--I1=32768,8,64", "--D1=49152,12,64", "--LL=2097152,16,64"]
    assert g.to_json()["LL"]["sets"] == 2048


@pytest.mark.unit
def test_geometry_rounds_a_non_power_of_two_set_count_and_says_so(tmp_path):
    root = fake_sysfs(tmp_path, [(1, "Data", "48K", 12, 64, "0"),
                                 (2, "Unified", "1536K", 16, 64, "0")])  # fmt: skip
    g = host_cache_geometry(root, overrides="")
    assert g.ll == Cache(1 << 20, 16, 64)  # 1536 sets -> 1024
    assert len(g.notes) == 1 and "1536 sets" in g.notes[0]
    assert g.i1.size == 32 << 10  # no L1i in this sysfs: the default


@pytest.mark.unit
def test_geometry_defaults_without_sysfs_and_overrides(tmp_path, monkeypatch):
    g = host_cache_geometry(tmp_path / "none", overrides="")
    assert g.ll == Cache(1280 << 10, 20, 64) and g.source.startswith("defaults")
    g = host_cache_geometry(tmp_path / "none", overrides="LL=8M,16,64; d1=32K,8,64")
    assert g.ll == Cache(8 << 20, 16, 64) and g.d1 == Cache(32 << 10, 8, 64)
    assert "PLACEMENT_SIM_CACHES" in g.source and g.ll_level == "LL (given)"
    monkeypatch.setenv("PLACEMENT_SIM_CACHES", "LL=256K,8,64")
    assert host_cache_geometry(tmp_path / "none").ll == Cache(256 << 10, 8, 64)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("L3=8M,16,64", "expected I1=, D1= or LL="),
        ("LL=8M,16", "expected SIZE,ASSOC,LINE"),
        ("LL=3M,16,64", "not a power of two"),
        ("LL=8M,16,48", "line size 48 B is not a power of two"),
    ],
)
@pytest.mark.unit
def test_bad_overrides_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(PlacementError, match=message) as info:
        host_cache_geometry(tmp_path / "none", overrides=text)
    assert "\n" not in str(info.value)


@pytest.mark.unit
def test_parse_cache_and_overrides():
    assert parse_cache("2MiB,16,64") == Cache(2 << 20, 16, 64)
    assert parse_cache("65536, 8, 64") == Cache(65536, 8, 64)
    assert set(parse_overrides("I1=32K,8,64 D1=48K,12,64")) == {"i1", "d1"}


@pytest.mark.unit
def test_parse_dump_reads_the_nest_and_its_summary():
    text = (
        "version: 1\ncreator: callgrind-3.19.0\ndesc: Trigger: Client Request: placement-nest 3\n"
        "events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nsummary: 100 40 20 0 9 8 0 7\n"
        "totals: 99 40 20 0 9 8 0 7\n"
    )
    index, counts = parse_dump(text)
    assert index == 3
    assert counts["Ir"] == 100 and counts["DLmr"] == 7 and counts["DLmw"] == 0  # trailing 0s
    assert parse_dump("desc: Trigger: Program termination\nevents: Ir\nsummary: 0\n")[0] is None


# --------------------------------------------------------------------------- tools, sources


def without(monkeypatch, *tools):
    real = shutil.which
    monkeypatch.setattr(counters_mod.shutil, "which",
                        lambda name, *a, **k: None if name in tools else real(name, *a, **k))


def no_pmu(monkeypatch):
    def unavailable():
        raise CountersUnavailable("no PMU (test)")

    monkeypatch.setattr(counters_mod, "table1_events", unavailable)


@pytest.mark.parametrize(("tool", "package"), [("valgrind", "`valgrind`"), ("gcc", "`gcc`")])
@pytest.mark.unit
def test_a_missing_tool_is_one_line_naming_the_package(monkeypatch, tool, package):
    without(monkeypatch, tool)
    no_pmu(monkeypatch)
    with pytest.raises(CountersUnavailable) as info:
        select_source("simulated")
    assert package in info.value.reason and "\n" not in info.value.reason
    choice = select_source("auto")  # never fails: none, with both reasons
    assert choice.source is None
    assert "no PMU (test)" in choice.reason and package in choice.reason


@pytest.mark.unit
def test_source_selection(monkeypatch):
    no_pmu(monkeypatch)
    assert select_source("none").source is None and select_source(False).reason == "not requested"
    with pytest.raises(CountersUnavailable, match="no PMU"):
        select_source("perf")
    with pytest.raises(PlacementError, match="unknown counter source 'papi'"):
        select_source("papi")
    if HAVE_SIMULATOR:
        choice = select_source(True)
        assert choice.source == "simulated" and choice.skipped == ("no PMU (test)",)
        assert choice.tools["valgrind"][0].isdigit()


# --------------------------------------------------------------------------- closed forms


def add_mlir(n: int) -> str:
    return f"""#map = affine_map<(d0) -> (d0)>
func.func @main(%a: tensor<{n}xf32>, %b: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %e = tensor.empty() : tensor<{n}xf32>
  %s = linalg.generic {{indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}}
      ins(%a, %b : tensor<{n}xf32>, tensor<{n}xf32>) outs(%e : tensor<{n}xf32>) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  }} -> tensor<{n}xf32>
  return %s : tensor<{n}xf32>
}}
"""


def gemv_mlir(n: int, op: str) -> str:
    """y = W x (``matvec``: W walked by row) or y = x W (``vecmat``: W walked by column)."""
    w, x = f"tensor<{n}x{n}xf32>", f"tensor<{n}xf32>"
    ins = f"%w, %x : {w}, {x}" if op == "matvec" else f"%x, %w : {x}, {w}"
    return f"""func.func @main(%w: {w}, %x: {x}) -> {x} {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {x}
  %c0 = linalg.fill ins(%z : f32) outs(%e : {x}) -> {x}
  %y = linalg.{op} ins({ins}) outs(%c0 : {x}) -> {x}
  return %y : {x}
}}
"""


def matmul_mlir(n: int, tile: int | None) -> str:
    """C = A B: ``linalg.matmul`` (loops i, j, k) or, with ``tile``, a generic over tiled
    views with loops i0, j0, k0, i1, k1, j1 (T x T tiles, the inner loop contiguous)."""
    m = f"tensor<{n}x{n}xf32>"
    if tile is None:
        return f"""func.func @main(%a: {m}, %b: {m}) -> {m} {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {m}
  %c0 = linalg.fill ins(%z : f32) outs(%e : {m}) -> {m}
  %c = linalg.matmul ins(%a, %b : {m}, {m}) outs(%c0 : {m}) -> {m}
  return %c : {m}
}}
"""
    b = n // tile
    t4 = f"tensor<{b}x{tile}x{b}x{tile}xf32>"
    dims = "(i0, j0, k0, i1, k1, j1)"
    return f"""#mA = affine_map<{dims} -> (i0, i1, k0, k1)>
#mB = affine_map<{dims} -> (k0, k1, j0, j1)>
#mC = affine_map<{dims} -> (i0, i1, j0, j1)>
func.func @main(%a: {m}, %b: {m}) -> {m} {{
  %a4 = tensor.expand_shape %a [[0, 1], [2, 3]] output_shape [{b}, {tile}, {b}, {tile}]
      : {m} into {t4}
  %b4 = tensor.expand_shape %b [[0, 1], [2, 3]] output_shape [{b}, {tile}, {b}, {tile}]
      : {m} into {t4}
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {t4}
  %c0 = linalg.fill ins(%z : f32) outs(%e : {t4}) -> {t4}
  %c = linalg.generic {{indexing_maps = [#mA, #mB, #mC], iterator_types = ["parallel",
      "parallel", "reduction", "parallel", "reduction", "parallel"]}}
      ins(%a4, %b4 : {t4}, {t4}) outs(%c0 : {t4}) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }} -> {t4}
  %r = tensor.collapse_shape %c [[0, 1], [2, 3]] : {t4} into {m}
  return %r : {m}
}}
"""


LOOP_MLIR = """#map = affine_map<(d0) -> (d0)>
func.func @main(%a: tensor<4x1024xf32>) -> tensor<4x1024xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %e = tensor.empty() : tensor<4x1024xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %e) -> (tensor<4x1024xf32>) {
    %row = tensor.extract_slice %a[%i, 0] [1, 1024] [1, 1]
        : tensor<4x1024xf32> to tensor<1024xf32>
    %o = tensor.empty() : tensor<1024xf32>
    %neg = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%row : tensor<1024xf32>) outs(%o : tensor<1024xf32>) {
    ^bb0(%x: f32, %y: f32):
      %n = arith.negf %x : f32
      linalg.yield %n : f32
    } -> tensor<1024xf32>
    %ins = tensor.insert_slice %neg into %acc[%i, 0] [1, 1024] [1, 1]
        : tensor<1024xf32> into tensor<4x1024xf32>
    scf.yield %ins : tensor<4x1024xf32>
  }
  return %r : tensor<4x1024xf32>
}
"""


def simulate(tmp_path, text, caches=SMALL, warmup=2, name="m.mlir", cold=False):
    pytest.importorskip("torch_mlir")
    from placement.profiling.mlir.lower import lower_mlir
    from placement.profiling.simulated import simulate_nests

    path = tmp_path / name
    path.write_text(text)
    program = lower_mlir(path)
    geometry = host_cache_geometry(overrides=caches)
    return program, simulate_nests(program, geometry=geometry, warmup=warmup, cold=cold)


def read_lines(sim, nest_id):
    return sim.counters[nest_id][SIM_LL_READ_MISSES]


@needs_simulator
@pytest.mark.integration
def test_a_stream_larger_than_the_cache_reads_its_footprint_once(tmp_path):
    n = 64 * 1024  # two 256 KiB inputs through a 64 KiB LL
    _, sim = simulate(tmp_path, add_mlir(n))
    footprint = 2 * n * 4
    got = sim.counters["n000"][SIM_OFFCORE_READ_BYTES]
    assert got == read_lines(sim, "n000") * LINE
    assert abs(got - footprint) / footprint < 0.02, (got, footprint)  # measured: +0.05 %
    # The output is written once: one LL write miss per line (write-allocate).
    assert abs(sim.counters["n000"][SIM_LL_WRITE_MISSES] - n * 4 / LINE) <= 8
    assert set(sim.counters["n000"]) == set(SIMULATED_EVENTS)
    assert sim.invocations == {"n000": 1}
    meta = sim.metadata
    assert meta["caches"]["LL"] == {"size": 65536, "assoc": 8, "line": 64, "sets": 128}
    assert meta["valgrind_version"][0].isdigit() and meta["target_features"] == ["-avx512f"]


@needs_simulator
@pytest.mark.integration
def test_arrays_that_fit_read_nothing_off_core_after_a_warm_up(tmp_path):
    n = 2048  # 3 x 8 KiB in a 64 KiB LL
    _, warm = simulate(tmp_path, add_mlir(n))
    assert read_lines(warm, "n000") == 0
    _, first = simulate(tmp_path, add_mlir(n), warmup=0)  # first touch: the footprint
    assert abs(read_lines(first, "n000") - 2 * n * 4 / LINE) <= 2
    _, cold = simulate(tmp_path, add_mlir(n), cold=True)  # flushed before the counted run
    assert abs(read_lines(cold, "n000") - 2 * n * 4 / LINE) <= 2
    assert cold.metadata["cache"] == "cold" and warm.metadata["cache"] == "warm"


@needs_simulator
@pytest.mark.integration
def test_gemv_reads_its_matrix_once(tmp_path):
    n = 256  # W is 256 KiB, 4x the LL
    _, sim = simulate(tmp_path, gemv_mlir(n, "matvec"))
    closed = (n * n * 4 + n * 4) / LINE  # W once, x once
    got = read_lines(sim, "n001")
    assert abs(got - closed) / closed < 0.01, (got, closed)  # measured: +0.27 %


@needs_simulator
@pytest.mark.integration
def test_gemv_walking_the_matrix_by_column_misses_once_per_element(tmp_path):
    # y = x W with linalg's loop order (j outer, k inner): each W element is on a
    # different line than the previous access, and a column's 256 lines map to 8 of
    # the LL's 128 sets (1 KiB stride), so nothing survives until the next column.
    n = 256
    _, sim = simulate(tmp_path, gemv_mlir(n, "vecmat"))
    got = read_lines(sim, "n001")
    assert abs(got - n * n) / (n * n) < 0.02, got  # 16x the matrix's 4096 lines


@needs_simulator
@pytest.mark.integration
def test_a_tiled_gemm_reads_far_less_than_the_naive_loop_order(tmp_path):
    n, tile, caches = 128, 32, "D1=8K,4,64 LL=32K,8,64"
    _, naive = simulate(tmp_path, matmul_mlir(n, None), caches, name="naive.mlir")
    _, tiled = simulate(tmp_path, matmul_mlir(n, tile), caches, name="tiled.mlir")
    naive_lines = read_lines(naive, "n001")
    # Naive (i, j, k): B walked by column, 512 B stride: every B access misses, n^3.
    assert abs(naive_lines - n**3) / n**3 < 0.02, naive_lines
    tiled_lines = read_lines(tiled, "n001")
    tile_lines = tile * tile * 4 / LINE
    blocks = n // tile
    compulsory = 3 * n * n * 4 / LINE  # A, B and C once
    no_reuse = blocks**3 * 2 * tile_lines + blocks**2 * tile_lines  # A, B tiles per (i0,j0,k0)
    assert compulsory <= tiled_lines <= no_reuse, (tiled_lines, compulsory, no_reuse)
    assert naive_lines > 100 * tiled_lines
    assert tiled.counters["n001"][SIM_INSTRUCTIONS] < naive.counters["n001"][SIM_INSTRUCTIONS]


@needs_simulator
@pytest.mark.integration
def test_a_nest_in_a_loop_accumulates_over_its_invocations_like_t_cpu(tmp_path):
    from placement.profiling.nest_timing import time_nests

    program, sim = simulate(tmp_path, LOOP_MLIR, warmup=0)
    assert [n.trip_count for n in program.nests[:2]] == [4, 4]
    timing = time_nests(program, runs=1, warmup=0)
    assert sim.invocations == timing.metadata["invocations_per_run"] == {
        "n000": 4, "n001": 4, "n002": 1}  # fmt: skip
    # Cold: the four invocations of n000 read the four rows of %a, 16 KiB in all.
    assert abs(read_lines(sim, "n000") - 4 * 1024 * 4 / LINE) <= 2


@needs_simulator
@pytest.mark.slow
def test_host_geometry_stream_and_gemv_closed_forms(tmp_path):
    """This host's caches (sysfs): a 2 x 4 MiB stream and a 4 MiB GEMV read their footprint."""
    geometry = host_cache_geometry(overrides="")
    caches = f"D1={geometry.d1.option()} LL={geometry.ll.option()}"
    ll = geometry.ll.size
    n = max(1 << 20, 2 * ll // 4)  # each input at least twice the LL
    _, sim = simulate(tmp_path, add_mlir(n), caches, name="add.mlir")
    footprint_lines = 2 * n * 4 / geometry.ll.line
    assert abs(read_lines(sim, "n000") - footprint_lines) / footprint_lines < 0.02
    m = 1024
    while m * m * 4 < 2 * ll:
        m *= 2
    _, sim = simulate(tmp_path, gemv_mlir(m, "matvec"), caches, name="gemv.mlir")
    closed = (m * m * 4 + m * 4) / geometry.ll.line
    assert abs(read_lines(sim, "n001") - closed) / closed < 0.01


@needs_simulator
@pytest.mark.integration
def test_a_simulation_failure_is_one_line(tmp_path, monkeypatch):
    from placement.profiling import simulated

    # AVX-512 (512-bit vectors forced): valgrind 3.19 cannot decode it.
    monkeypatch.setattr(simulated, "TARGET_FEATURES", ("+avx512f", "-prefer-256-bit"))
    with pytest.raises(PlacementError) as info:
        simulate(tmp_path, add_mlir(4096))
    text = str(info.value)
    assert "\n" not in text and text.startswith("the cache simulation failed: ")
    assert "instruction" in text


@needs_simulator
@pytest.mark.integration
def test_representative_layers_count_what_the_full_simulation_counts(tmp_path):
    """Five identical decoder layers: the later layers' nests take the second layer's
    counters (placement.profiling.repeats) and do not run. Against the full simulation:
    totals within 1 % (LL write misses 5 %: a few thousand lines, the skipped layers'
    absent stores shift some), every nest with 1,000+ LL read misses within 3 %, every
    nest within 64 lines. Not exact: the caches before the first counted nest after the
    skipped ones are rebuilt by the context, not reproduced, and the guards that skip
    nests change LLVM's register allocation a little (a few instructions per nest)."""
    pytest.importorskip("torch_mlir")
    import onnx

    from placement.networks.workloads import decoder_stack
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.mlir.optimize import optimize_program
    from placement.profiling.repeats import simulation_plan
    from placement.profiling.simulated import simulate_nests

    path = tmp_path / "stack.onnx"
    onnx.save(decoder_stack(128, 2, 344, layers=5, kind="llama", past=16), str(path))
    program = optimize_program(lower_onnx(path))
    geometry = host_cache_geometry(overrides=SMALL)
    plan = simulation_plan(program, geometry.ll.size, warm=False)
    assert not plan.is_full and len(plan.skipped) > 50
    full = simulate_nests(program, geometry=geometry, cold=True)
    rep = simulate_nests(program, geometry=geometry, cold=True, plan=plan)
    assert rep.metadata["nests"]["skipped_nests"] == len(plan.skipped)
    assert rep.metadata["nests_guarded"] and not full.metadata["nests_guarded"]
    for event, total_tolerance in ((SIM_INSTRUCTIONS, 0.01), (SIM_LL_READ_MISSES, 0.01),
                                   (SIM_LL_WRITE_MISSES, 0.05)):  # fmt: skip
        want = sum(c[event] for c in full.counters.values())
        got = sum(c[event] for c in rep.counters.values())
        assert abs(got - want) <= total_tolerance * want, (event, got, want)
    for nest_id, counts in full.counters.items():
        want, got = counts[SIM_LL_READ_MISSES], rep.counters[nest_id][SIM_LL_READ_MISSES]
        assert abs(got - want) <= max(64, 0.03 * want), (nest_id, got, want)
    # A skipped nest's counters are its representative's, as simulated.
    for nest_id in plan.skipped:
        assert rep.counters[nest_id] == rep.counters[plan.representative[nest_id]]
