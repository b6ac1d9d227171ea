"""The side-by-side all-reduce table from the files tests/bench/nccl_tests.sh writes into one folder.

    python tests/bench/allreduce_table.py OUT_DIR [--sizes 8,512M,2G] [--json]

Columns per size: nccl-tests (plain and -G 20, out-of-place), the plain torch all_reduce loop, and
`mgtutor bench allreduce` (out-of-place and in-place). Small sizes are compared by time (µs),
large ones by bus bandwidth (GB/s), as nccl-tests reports them.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
Row = dict[str, float]  # time_us, busbw_gbps (and in-place twins)


def size(text: str) -> int:
    return int(text[:-1]) * UNITS[text[-1].upper()] if text[-1].upper() in UNITS else int(text)


def nccl_tests_rows(path: Path) -> dict[int, Row]:
    """all_reduce_perf's table: size count type redop root | time algbw busbw #wrong | the same in place."""
    rows: dict[int, Row] = {}
    if not path.is_file():
        return rows
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) < 13 or not parts[0].isdigit():
            continue
        try:
            rows[int(parts[0])] = {"time_us": float(parts[5]), "busbw_gbps": float(parts[7]),
                                   "ip_time_us": float(parts[9]), "ip_busbw_gbps": float(parts[11])}
        except ValueError:
            continue
    return rows


def plain_loop_rows(path: Path) -> dict[int, Row]:
    pattern = re.compile(r"plain loop\s+(\d+) B\s+([\d.]+) us.*busbw\s+([\d.]+) GB/s")
    rows: dict[int, Row] = {}
    if path.is_file():
        for match in pattern.finditer(path.read_text(errors="replace")):
            rows[int(match[1])] = {"time_us": float(match[2]), "busbw_gbps": float(match[3])}
    return rows


def mgtutor_rows(path: Path) -> dict[int, Row]:
    rows: dict[int, Row] = {}
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return rows
    for row in report.get("rows", []):
        key = "ip_" if row.get("in_place") else ""
        rows.setdefault(int(row["bytes"]), {}).update({f"{key}time_us": row["time_us"],
                                                       f"{key}busbw_gbps": row["busbw_gbps"]})
    return rows


def table(folder: Path, sizes: list[int]) -> list[dict[str, Any]]:
    sources = {"nccl_tests": nccl_tests_rows(folder / "nccl_tests.txt"),
               "nccl_tests_G20": nccl_tests_rows(folder / "nccl_tests_G20.txt"),
               "plain_loop": plain_loop_rows(folder / "plain_loop.txt"),
               "mgtutor": mgtutor_rows(folder / "mgtutor_bench.json")}
    return [{"bytes": n, **{name: rows.get(n) for name, rows in sources.items()}} for n in sizes]


def _cell(row: Row | None, key: str) -> str:
    if not row or key not in row:
        return "–"
    return f"{row[key]:.2f}" if key.endswith("us") else f"{row[key]:.1f}"


def render(rows: list[dict[str, Any]]) -> str:
    lines = ["size        metric       nccl-tests  nccl-tests -G20  plain loop  mgtutor oop  mgtutor in-place"]
    for row in rows:
        small = row["bytes"] < (1 << 20)
        key, unit = ("time_us", "µs") if small else ("busbw_gbps", "GB/s")
        ip = "ip_" + key
        lines.append(f"{row['bytes']:>10}  {unit + (' time' if small else ' busbw'):<11}  "
                     f"{_cell(row['nccl_tests'], key):>10}  {_cell(row['nccl_tests_G20'], key):>15}  "
                     f"{_cell(row['plain_loop'], key):>10}  {_cell(row['mgtutor'], key):>11}  "
                     f"{_cell(row['mgtutor'], ip):>16}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--sizes", default="8,512M,2G")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = table(args.folder, [size(s) for s in args.sizes.split(",")])
    print(json.dumps(rows, indent=1) if args.json else render(rows))


if __name__ == "__main__":
    main()
