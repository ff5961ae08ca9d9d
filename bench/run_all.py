"""Runs every benchmark in bench/ one after another and collects their RATIO lines.

    .venv/bin/python bench/run_all.py [--only NAME ...] [--quick]   (`make bench` runs this)

`--quick` is passed on to the benchmarks that take it (vs_sb3: tiny budgets, 1 seed).

Each benchmark runs as its own process (a fresh Ray for each), with its output
shown as it goes; at the end the RATIO/RESULT lines of all of them are printed
together. Benchmarks report and never fail: the exit code is non-zero only when a
benchmark itself crashed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
# These first, in this order; any other bench/*.py (not _private, not this file) after;
# LAST at the end (vs_sb3: the longest, ~40 min here; it skips without the `bench` extra).
FIRST = ["tracking_overhead", "service_vs_plain", "polling"]
LAST = ["vs_sb3"]
TAKES_QUICK = {"vs_sb3"}


def benchmarks() -> list[str]:
    found = sorted(p.stem for p in BENCH.glob("*.py") if not p.stem.startswith("_"))
    found = [name for name in found if name != Path(__file__).stem]
    middle = [n for n in found if n not in FIRST and n not in LAST]
    return [n for n in FIRST if n in found] + middle + [n for n in LAST if n in found]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="benchmark names (default: all)")
    parser.add_argument(
        "--quick", action="store_true", help="smoke budgets where a benchmark has them"
    )
    args = parser.parse_args(argv)
    names = args.only or benchmarks()
    summary: list[str] = []
    failed: list[str] = []
    for name in names:
        script = BENCH / f"{name}.py"
        print(f"\n===== {name} =====", flush=True)
        t0 = time.perf_counter()
        lines: list[str] = []
        extra = ["--quick"] if args.quick and name in TAKES_QUICK else []
        with subprocess.Popen(
            [sys.executable, str(script), *extra],
            cwd=BENCH.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        ) as proc:
            for line in proc.stdout:
                print(line, end="", flush=True)
                if line.startswith(("RATIO ", "RESULT ")):
                    lines.append(line.rstrip())
        took = time.perf_counter() - t0
        if proc.returncode != 0:
            failed.append(name)
            lines.append(f"(crashed: exit code {proc.returncode})")
        summary += [f"{name:<20} {line}" for line in lines or ["(no RATIO line)"]]
        print(f"===== {name}: {took:.0f} s =====", flush=True)
    print("\n===== summary =====")
    print("\n".join(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
