"""Recreate the golden outputs in tests/golden/expected/ from the current code.

    python tests/golden/regenerate.py            # every case
    python tests/golden/regenerate.py CASE ...   # only these cases (names: see cases.py)

Regenerate ONLY for a deliberate behaviour change, and review ``git diff tests/golden``
before committing: the golden files are what ``tests/cli/test_golden.py`` holds the code to,
so regenerating after an accidental change would silently bless it. A refactoring that
preserves behaviour must pass the test without regenerating anything.

The inputs (the saved host profile and nest profile, see ``cases.CIM_PROFILE`` and
``cases.PIM_PROFILE``) are NOT re-measured: every golden number depends on them. Only
with ``--new-profiles`` are they measured again on this machine (``placement profile``),
which changes nearly every expected value; after that, all cases are regenerated.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, as under pytest

from golden import cases  # noqa: E402

# A few LP/MPS coefficients are float sums over sets of operator names, so their last bit
# depends on the hash seed (-4950.0 or -4949.999999999999). The test compares numbers to a
# relative 1e-9 under any seed; a fixed seed here only keeps regenerated files byte-stable.
HASH_SEED = "0"


def new_profiles() -> None:
    for model, profile, extra in (
        (cases.CIM_MODEL, cases.CIM_PROFILE, []),
        (cases.PIM_MODEL, cases.PIM_PROFILE, ["--target", "pim"]),
    ):
        command = [*cases.cli_command(), "profile", model, *extra, "-o", profile]
        print("$ placement", *command[3:], flush=True)
        subprocess.run(command, cwd=cases.ROOT, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", metavar="CASE", help="default: all")
    parser.add_argument(
        "--new-profiles",
        action="store_true",
        help="re-measure the input profiles on this machine first (changes every number)",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.cases) - set(cases.CASE_NAMES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(cases.CASE_NAMES)}")
    if args.new_profiles:
        if args.cases:
            parser.error("--new-profiles regenerates every case; give no CASE")
        new_profiles()
    selected = [c for c in cases.CASES if not args.cases or c.name in args.cases]
    if not args.cases and cases.EXPECTED.exists():  # drop cases that no longer exist
        for stale in sorted(p for p in cases.EXPECTED.iterdir() if p.name not in cases.CASE_NAMES):
            print(f"removing stale {stale.relative_to(cases.ROOT)}")
            for f in sorted(stale.rglob("*"), reverse=True):
                f.unlink() if f.is_file() else f.rmdir()
            stale.rmdir()
    for case in selected:
        with tempfile.TemporaryDirectory(prefix=f"golden-{case.name}-") as tmp:
            outcome = cases.run_case(case, Path(tmp), hash_seed=HASH_SEED)
        cases.save_outcome(case.name, outcome, case)
        print(f"{case.name}: exit {outcome.exit_code}, {len(outcome.files)} file(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
