"""Line and branch coverage per package, from coverage's JSON report (`make coverage`).

coverage.py reports per file; a contributor asks per package ("did the storage layer lose
coverage?"), so this sums the files of each package (runner/<layer>, runner/studies/<study>,
analyses, models) and prints one Markdown table.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def package_of(path: str) -> str:
    """`runner/storage/store.py` -> `runner/storage`; `runner/studies/depth/x/y.py` -> `runner/studies/depth`."""
    parts = Path(path).parts
    if parts[0] == "runner" and len(parts) > 3 and parts[1] == "studies":
        return "/".join(parts[:3])
    if parts[0] == "runner" and len(parts) > 2:
        return "/".join(parts[:2])
    if parts[0] == "runner":
        return "runner (cli, api)"
    return parts[0]


def table(report: dict) -> list[dict]:
    sums: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for path, data in report["files"].items():
        s = data["summary"]
        row = sums[package_of(path)]
        row["files"] += 1
        for key in ("num_statements", "covered_lines", "num_branches", "covered_branches"):
            row[key] += s.get(key, 0)
    rows = []
    for package, s in sorted(sums.items()):
        lines = 100 * s["covered_lines"] / s["num_statements"] if s["num_statements"] else 100.0
        branches = 100 * s["covered_branches"] / s["num_branches"] if s["num_branches"] else 100.0
        rows.append({"package": package, "files": s["files"], "statements": s["num_statements"],
                     "lines %": round(lines, 1), "branches %": round(branches, 1)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="coverage.json from `coverage json`")
    args = parser.parse_args()
    report = json.loads(args.report.read_text())
    rows = table(report)
    head = list(rows[0])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in head) + " |")
    t = report["totals"]
    print(f"| total | {len(report['files'])} | {t['num_statements']} | {t['percent_covered']:.1f} (lines and branches) | |")


if __name__ == "__main__":
    main()
