"""Golden-output cases of the ``placement`` command: what is run, and how outputs are compared.

Shared by ``tests/golden/regenerate.py`` (writes ``tests/golden/expected/``) and
``tests/cli/test_golden.py`` (runs the same commands and compares). Imported the plain-pytest
way: ``tests/`` is on ``sys.path`` (as for ``oracles``), so this module is ``golden.cases``.

Every case runs the real CLI in a subprocess with ``COLUMNS=80`` (100 for the solve cases
with tables: ``Case.columns``), in a fresh working
directory that holds copies of the inputs at their repository-relative paths
(``examples/*.onnx``, ``tests/golden/*.json``), so command lines and the paths printed
are the ones a user gets from the repository root. Host latencies always come from the
saved profiles in ``tests/golden``: nothing is measured, every number is reproducible.

What a case records (``expected/<case>/``):

* ``meta.json``: the arguments, the exit code and the sorted list of files the command
  created or changed in its working directory;
* ``stdout.txt``, ``stderr.txt``: the streams after :data:`TEXT_MASKS`;
* ``files/<path>``: every created file, after masking (JSON: :data:`MASKED_KEYS` by key
  name at any depth; CSV: the same names as columns; other text: :data:`TEXT_MASKS`).

Comparison: text exactly (after masking); JSON and CSV structurally, floats with a
relative tolerance of :data:`REL_TOL`, everything else exactly; LP and MPS line by line,
numbers to :data:`REL_TOL` and every other token exactly (a few coefficients change in the
last bit with PYTHONHASHSEED, see ``_compare_numbers_in_text``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent
ROOT = GOLDEN.parent.parent
EXPECTED = GOLDEN / "expected"

CIM_MODEL = "examples/resnet_tiny_int8.onnx"
PIM_MODEL = "examples/resnet_tiny.onnx"  # fp32: torch-mlir lowers it in about a second
CIM_PROFILE = "tests/golden/resnet_tiny_int8.profile.json"  # placement profile CIM_MODEL
PIM_PROFILE = "tests/golden/resnet_tiny.nests.json"  # placement profile PIM_MODEL --target pim
INPUTS = (CIM_MODEL, PIM_MODEL, CIM_PROFILE, PIM_PROFILE)  # copied into every working dir

REL_TOL = 1e-9
MASK = "<masked>"

# Values that are wall-clock times, dates or versions, masked wherever they occur as a
# JSON key (any depth) or a CSV column. Everything else must match.
MASKED_KEYS = frozenset(
    {
        "build_seconds",  # solve/sweep result: model build time
        "solve_seconds",  # solve/sweep result and points.csv: solver wall time
        "heuristic_seconds",  # result options of the tightened formulation
        "seconds",  # result options: the wall time of each phase of a solve
        "phase_time_limit",  # result options: what the deadline left the solver phase
        "heuristic_s", "build_s", "solve_s", "total_s", "overhead_s", "build_share",  # bench
        "mean_total_s", "max_total_s", "mean_solve_s", "mean_build_share",  # bench summary
        "created",  # sweep manifest: date
        "placement_version",  # sweep manifest: package version
    }
)  # fmt: skip

# Regexes for stdout, stderr and text files: times, versions and the machine-dependent
# CPU count, each anchored on the words around it so nothing else is touched.
TEXT_MASKS: tuple[tuple[str, str], ...] = (
    # solve: "solve 0.03 s (build 0.01 s, heuristic start 0.00 s)"
    (r"\b(solve|build|heuristic start) \d+\.\d+ s\b", r"\1 <T> s"),
    # solve: "HiGHS (highspy 1.15.1)"
    (r"\(highspy [^)\s]+\)", "(highspy <VERSION>)"),
    # --version
    (r"(?m)^placement \d\S*$", "placement <VERSION>"),
    # sweep --help: the default worker count depends on the CPUs of the machine
    (r"min\(2, CPUs\) = \d+", "min(2, CPUs) = <N>"),
    # presets: which preset is the default depends on the machine's architecture
    (r"  \(default on this machine\)", ""),
    # nests: "49 loop nests, lowered in 0.52 s"
    (r"\blowered in \d+\.\d+ s\b", "lowered in <T> s"),
    # solve progress on stderr, a line every few seconds of a long solve: none is expected
    # (the cases solve in well under a second), but a loaded machine must not fail them
    (r"(?m)^solving: .*\n", ""),
    # sweep progress and summary on stderr
    (r"\b\d+ s elapsed, ETA \d+ s\b", "<T> s elapsed, ETA <T> s"),
    (r"\b\d+ s elapsed, ETA \?", "<T> s elapsed, ETA ?"),
    (r"resumed\) in \d+\.\d+ s;", "resumed) in <T> s;"),
    # bench progress on stderr: "[1/1 0s] ... optimal gap 0.000% in 0.13s verified=True"
    (r"\[(\d+/\d+) \d+s\]", r"[\1 <T>s]"),
    (r" in \d+\.\d+s verified=", " in <T>s verified="),
    # bench Table-I summary row (stdout, summary.txt): the 'mean s', 'max s', 'build%' columns
    (
        r"(?m)^(.*\d)\s+\d+\.\d{3}\s+\d+\.\d{2}(\s+(?:\d+\.\d{3}|-)\s+(?:\d+\.\d{3}|-)"
        r"\s+\d+/\d+\s+\d+)\s+\d+\.\d(\s.*)?$",
        r"\1 <T> <T>\2 <T>\3",
    ),
)


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    # (source relative to the repository, destination relative to the working dir):
    # files placed beside INPUTS before the command runs
    seed: tuple[tuple[str, str], ...] = ()
    columns: int = 80  # COLUMNS of the terminal the command runs in


def _sha12(path: str) -> str:
    return hashlib.sha256((ROOT / path).read_bytes()).hexdigest()[:12]


def _args(command: str) -> tuple[str, ...]:
    return tuple(shlex.split(command))


CIM = f"--profile {CIM_PROFILE} --hardware arm-a72"
WIDE = 100  # the terminal width of the solve cases with tables (placement.tables.WIDTH)
SUBCOMMANDS = (
    "solve", "profile", "calibrate", "nests", "presets", "sweep", "pareto", "bench", "export",
    "report",
)  # fmt: skip
# 8 and 50 crossbars give different optima (the budget binds at 8, not at 50).
CASES: tuple[Case, ...] = (
    Case("help", ("--help",)),
    *(Case(f"help-{cmd}", (cmd, "--help")) for cmd in SUBCOMMANDS),
    Case("version", ("--version",)),
    Case("presets", ("presets",)),
    # CIM solve (HiGHS; --formulation auto picks 'bounded' on this near-chain graph)
    Case(
        "cim-solve",
        _args(f"solve {CIM_MODEL} {CIM} --crossbars 50 --t-mvm-ns 100 --json out.json"),
    ),
    # At 100 columns, the width every table fits (tests/cli/test_golden.py checks it).
    Case(
        "cim-solve-details",
        _args(f"solve {CIM_MODEL} {CIM} --crossbars 8 --t-mvm-ns 100 --details --json out.json"),
        columns=WIDE,
    ),
    # The tightened formulation with the heuristic's warm start, and the hardware preset
    # chosen from the profile's machine; --solver highs because 'auto' would run CP-SAT
    # first (when OR-Tools is installed) for this formulation.
    Case(
        "cim-solve-tightened",
        _args(
            f"solve {CIM_MODEL} --profile {CIM_PROFILE} --crossbars 8 --formulation tightened"
            " --solver highs --json out.json"
        ),
    ),
    # Host latencies from the analytical host model: no profile, every number an estimate.
    Case(
        "cim-solve-model",
        _args(f"solve {CIM_MODEL} --hardware arm-a72-model --crossbars 50 --t-mvm-ns 100"
              " --details --json out.json"),
    ),
    Case(
        "pim-solve",
        _args(
            f"solve {PIM_MODEL} --target pim --profile {PIM_PROFILE} --pim-cores 32,64"
            " --json out.json"
        ),
        columns=WIDE,
    ),
    # The paper's Eq. 8 (the default until the memory architectures): the same numbers as
    # before them, and a partitioned device (UPMEM) with its link and resident weights.
    Case(
        "pim-solve-upper-bound",
        _args(
            f"solve {PIM_MODEL} --target pim --profile {PIM_PROFILE} --pim-cores 32,64"
            " --copy upper_bound"
        ),
        columns=WIDE,
    ),
    Case(
        "pim-solve-upmem",
        _args(
            f"solve {PIM_MODEL} --target pim --profile {PIM_PROFILE} --pim-cores 32,64"
            " --pim-hardware pim-upmem --json out.json"
        ),
        columns=WIDE,
    ),
    # Basic-block granularity (the blocks come from lowering the model again) and Table 5's
    # comparison of the three granularities.
    Case(
        "pim-solve-basic-block",
        _args(
            f"solve {PIM_MODEL} --target pim --profile {PIM_PROFILE} --pim-cores 32"
            " --granularity basic-block --compare-granularities --json out.json"
        ),
    ),
    Case("pim-nests", _args(f"nests {PIM_MODEL} --json nests.json")),
    # export: the default (auto, as for solve: bounded on this graph) and faithful, LP and MPS
    *(
        Case(
            f"export-{form}-{fmt}",
            _args(
                f"export {CIM_MODEL} {CIM} --crossbars 50 --t-mvm-ns 100 -o cim.{fmt}"
                + ("" if form == "default" else f" --formulation {form}")
            ),
        )
        for form in ("default", "faithful")
        for fmt in ("lp", "mps")
    ),
    Case(
        "cim-sweep",
        _args(
            f"sweep {CIM_MODEL} --profile {CIM_PROFILE} --hardware arm-a72 --crossbars 8,50"
            " --t-mvm-ns 100 --workers 1 -o sweep"
        ),
    ),
    # bench has no --profile flag; it reuses OUT/profiles/<name>-<sha12>.json when that
    # file exists, so the saved profile is seeded there and nothing is measured.
    Case(
        "cim-bench",
        _args(
            f"bench {CIM_MODEL} --grid 8x100 --formulations tightened --solvers highs"
            " --solver-threads 1 -o bench"
        ),
        seed=((CIM_PROFILE, f"bench/profiles/resnet_tiny_int8-{_sha12(CIM_MODEL)}.json"),),
    ),
    # bad inputs: exit code and stderr
    Case("err-no-command", ()),
    Case("err-missing-model", _args(f"solve examples/missing.onnx {CIM}")),
    Case("err-crossbars-not-int", _args(f"solve {CIM_MODEL} {CIM} --crossbars abc")),
    Case("err-crossbars-zero", _args(f"solve {CIM_MODEL} {CIM} --crossbars 0")),
    Case("err-pim-with-cim-flag", _args(f"solve {PIM_MODEL} --target pim --crossbars 50")),
    Case("err-cim-with-pim-flag", _args(f"solve {CIM_MODEL} {CIM} --pim-cores 32")),
    Case("err-profile-of-other-model", _args(f"solve {PIM_MODEL} {CIM}")),
    Case("err-export-suffix", _args(f"export {CIM_MODEL} {CIM} -o model.txt")),
    Case("err-bench-grid", _args(f"bench {CIM_MODEL} --grid 8x -o bench")),
    Case("err-sweep-pim-flag", _args(f"sweep {CIM_MODEL} --pim-cores 32 -o sweep")),
)
CASE_NAMES = tuple(c.name for c in CASES)
assert len(set(CASE_NAMES)) == len(CASE_NAMES)


# --------------------------------------------------------------------------- running


def cli_command() -> list[str]:
    """The ``placement`` console script, as declared in pyproject.toml ([project.scripts]).

    Resolved from pyproject.toml at run time (not from the installed wrapper), so moving
    ``main`` only needs that entry updated, not a reinstall.
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    with (ROOT / "pyproject.toml").open("rb") as fh:
        target = tomllib.load(fh)["project"]["scripts"]["placement"]
    module, func = target.split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {func}; sys.exit({func}())"]


@dataclass
class Outcome:
    """One case's outputs, masked: what is stored in and compared with ``expected/``."""

    exit_code: int
    stdout: str
    stderr: str
    files: dict[str, str]  # path relative to the working dir -> masked content


def run_case(case: Case, workdir: Path, hash_seed: str | None = None) -> Outcome:
    """Run ``case`` in the empty directory ``workdir`` and return its masked outputs.

    ``hash_seed``: PYTHONHASHSEED of the command (default: inherited, normally random).
    """
    for rel in INPUTS:
        _copy(ROOT / rel, workdir / rel)
    for src, dst in case.seed:
        _copy(ROOT / src, workdir / dst)
    before = _snapshot(workdir)
    # PLACEMENT_CACHE (the network zoo's cache dir) is not used by these cases; dropped anyway
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT")}
    env.update(COLUMNS=str(case.columns), LINES="24", PYTHONIOENCODING="utf-8")
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = hash_seed
    proc = subprocess.run(
        [*cli_command(), *case.args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
    )
    after = _snapshot(workdir)
    changed = sorted(p for p, digest in after.items() if before.get(p) != digest)
    files = {p: mask_file(p, (workdir / p).read_text(encoding="utf-8"), workdir) for p in changed}
    return Outcome(
        proc.returncode,
        mask_text(proc.stdout, workdir),
        mask_text(proc.stderr, workdir),
        files,
    )


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def _snapshot(workdir: Path) -> dict[str, str]:
    return {
        p.relative_to(workdir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in workdir.rglob("*")
        if p.is_file()
    }


# --------------------------------------------------------------------------- masking


def mask_text(text: str, workdir: Path | None = None) -> str:
    """Absolute paths of the working dir and the repository, then :data:`TEXT_MASKS`."""
    if workdir is not None:
        text = text.replace(str(workdir.resolve()), "<WORKDIR>").replace(str(workdir), "<WORKDIR>")
    text = text.replace(str(ROOT), "<ROOT>")
    for pattern, repl in TEXT_MASKS:
        text = re.sub(pattern, repl, text)
    return text


def mask_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (MASK if k in MASKED_KEYS else mask_json(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_json(v) for v in value]
    return value


def mask_file(path: str, text: str, workdir: Path | None = None) -> str:
    """The stored form of an output file: JSON re-serialized, CSV rewritten, text masked."""
    text = mask_text(text, workdir)  # paths anywhere, before parsing
    if path.endswith(".json"):
        return json.dumps(mask_json(json.loads(text)), indent=1) + "\n"
    if path.endswith(".jsonl"):
        return "".join(json.dumps(mask_json(json.loads(x))) + "\n" for x in text.splitlines())
    if path.endswith(".csv"):
        rows = list(csv.reader(io.StringIO(text)))
        if rows:
            masked = {i for i, name in enumerate(rows[0]) if name in MASKED_KEYS}
            body = [[MASK if i in masked else v for i, v in enumerate(r)] for r in rows[1:]]
            rows = [rows[0], *body]
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        return out.getvalue()
    return text


# --------------------------------------------------------------------------- storing


def save_outcome(name: str, outcome: Outcome, case: Case) -> None:
    directory = EXPECTED / name
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    meta = {"args": list(case.args), "exit_code": outcome.exit_code, "files": sorted(outcome.files)}
    (directory / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    (directory / "stdout.txt").write_text(outcome.stdout, encoding="utf-8")
    (directory / "stderr.txt").write_text(outcome.stderr, encoding="utf-8")
    for rel, content in outcome.files.items():
        target = directory / "files" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def load_outcome(name: str) -> tuple[dict[str, Any], Outcome]:
    directory = EXPECTED / name
    meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    files = {rel: (directory / "files" / rel).read_text(encoding="utf-8") for rel in meta["files"]}
    return meta, Outcome(
        meta["exit_code"],
        (directory / "stdout.txt").read_text(encoding="utf-8"),
        (directory / "stderr.txt").read_text(encoding="utf-8"),
        files,
    )


# --------------------------------------------------------------------------- comparing


def differences(expected: Outcome, actual: Outcome) -> list[str]:
    """Human-readable differences between two outcomes ([] when they agree)."""
    out: list[str] = []
    if expected.exit_code != actual.exit_code:
        out.append(f"exit code: expected {expected.exit_code}, got {actual.exit_code}")
    out += _text_diff("stdout", expected.stdout, actual.stdout)
    out += _text_diff("stderr", expected.stderr, actual.stderr)
    if sorted(expected.files) != sorted(actual.files):
        out.append(f"files created: expected {sorted(expected.files)}, got {sorted(actual.files)}")
    for rel in sorted(set(expected.files) & set(actual.files)):
        compare = _COMPARERS.get(Path(rel).suffix, _compare_text)
        out += compare(rel, expected.files[rel], actual.files[rel])
    return out


def _text_diff(label: str, expected: str, actual: str) -> list[str]:
    if expected == actual:
        return []
    import difflib

    diff = difflib.unified_diff(
        expected.splitlines(), actual.splitlines(), "expected", "actual", lineterm="", n=1
    )
    return [f"{label} differs:\n" + "\n".join(list(diff)[:80])]


def _compare_text(rel: str, expected: str, actual: str) -> list[str]:
    return _text_diff(rel, expected, actual)


def _compare_numbers_in_text(rel: str, expected: str, actual: str) -> list[str]:
    """LP/MPS: line by line, numbers with :data:`REL_TOL`, every other token exactly.

    Some coefficients are sums over Python sets of operator names, whose order (and so
    the last bit of the sum) depends on PYTHONHASHSEED: -4950.0 in one run,
    -4949.999999999999 in the next.
    """
    exp, act = expected.splitlines(), actual.splitlines()
    if len(exp) != len(act):
        return _text_diff(rel, expected, actual)
    for i, (e, a) in enumerate(zip(exp, act, strict=False)):
        if e == a:
            continue
        e_tokens, a_tokens = e.split(), a.split()
        if len(e_tokens) != len(a_tokens) or not all(
            x == y or _close_numbers(x, y) for x, y in zip(e_tokens, a_tokens, strict=True)
        ):
            return [f"{rel} line {i + 1}: expected {e!r}, got {a!r}"]
    return []


def _compare_json(rel: str, expected: str, actual: str) -> list[str]:
    problems: list[str] = []
    _compare_values(json.loads(expected), json.loads(actual), rel, problems)
    return problems


def _compare_jsonl(rel: str, expected: str, actual: str) -> list[str]:
    problems: list[str] = []
    exp, act = expected.splitlines(), actual.splitlines()
    if len(exp) != len(act):
        return [f"{rel}: {len(exp)} lines expected, {len(act)} found"]
    for i, (e, a) in enumerate(zip(exp, act, strict=False)):
        _compare_values(json.loads(e), json.loads(a), f"{rel}:{i + 1}", problems)
    return problems


def _compare_csv(rel: str, expected: str, actual: str) -> list[str]:
    exp = list(csv.reader(io.StringIO(expected)))
    act = list(csv.reader(io.StringIO(actual)))
    if not exp or not act or exp[0] != act[0]:
        return [f"{rel}: header {act[:1]} differs from {exp[:1]}"]
    if len(exp) != len(act):
        return [f"{rel}: {len(exp) - 1} rows expected, {len(act) - 1} found"]
    problems: list[str] = []
    for i, (e_row, a_row) in enumerate(zip(exp[1:], act[1:], strict=True)):
        for column, e, a in zip(exp[0], e_row, a_row, strict=False):
            if e != a and not _close_numbers(e, a):
                problems.append(f"{rel} row {i + 1} column {column}: expected {e!r}, got {a!r}")
    return problems


def _close_numbers(e: str, a: str) -> bool:
    try:
        return math.isclose(float(e), float(a), rel_tol=REL_TOL)
    except ValueError:
        return False


def _compare_values(e: Any, a: Any, where: str, problems: list[str]) -> None:
    if isinstance(e, dict) and isinstance(a, dict):
        if set(e) != set(a):
            problems.append(
                f"{where}: keys missing {sorted(set(e) - set(a))}, extra {sorted(set(a) - set(e))}"
            )
        for k in e.keys() & a.keys():
            _compare_values(e[k], a[k], f"{where}.{k}", problems)
    elif isinstance(e, list) and isinstance(a, list):
        if len(e) != len(a):
            problems.append(f"{where}: {len(e)} items expected, {len(a)} found")
        for i, (x, y) in enumerate(zip(e, a, strict=False)):
            _compare_values(x, y, f"{where}[{i}]", problems)
    elif type(e) is float and type(a) is float:
        if not (e == a or math.isclose(e, a, rel_tol=REL_TOL) or math.isnan(e) and math.isnan(a)):
            problems.append(f"{where}: expected {e!r}, got {a!r}")
    elif type(e) is not type(a) or e != a:
        problems.append(f"{where}: expected {e!r}, got {a!r}")


_COMPARERS: dict[str, Callable[[str, str, str], list[str]]] = {
    ".json": _compare_json,
    ".jsonl": _compare_jsonl,
    ".csv": _compare_csv,
    ".lp": _compare_numbers_in_text,
    ".mps": _compare_numbers_in_text,
}
