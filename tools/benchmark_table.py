"""README.md's table of the committed benchmark results: for each JSON in benchmarks/results/ (and each budget check),
what it measures, the command that produced it, when and on what.

The table sits between two markers in README.md and is made from the files, never typed:
tests/benchmarks/test_benchmarks_run.py fails when it differs from what this script makes.

Run: .venv/bin/python tools/benchmark_table.py          # rewrite the table in README.md
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
START, END = "<!-- benchmark-table:start -->", "<!-- benchmark-table:end -->"
NOT_RECORDED = "not recorded"


def _script_of(name: str) -> Path | None:
    """The script that writes ``name`` (a result's benchmark name): the one whose source names it."""
    for script in sorted((ROOT / "benchmarks").glob("[!_]*.py")):
        if re.search(rf"[\"']{re.escape(name)}[\"']", script.read_text(encoding="utf-8")):
            return script
    return None


def _summary(script: Path | None) -> str:
    if script is None:
        return ""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0].rstrip(".") if doc.strip() else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rows() -> list[tuple[str, str, str, str, str]]:
    """(file, what it measures, command, when, machine) for each committed result."""
    found = []
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        meta = data.get("meta", {})
        name = data.get("benchmark", path.stem)
        script = _script_of(name)
        command = meta.get("command")
        if command is None:
            where = f"`benchmarks/{script.name}`, settings in the file" if script else ""
            command = f"{NOT_RECORDED} ({where})" if where else NOT_RECORDED
        else:
            command = f"`{command}`"
        when = str(meta.get("when") or meta.get("date") or "")[:10]
        machine = ", ".join(str(x) for x in (meta.get("cpu"), meta.get("cpu_threads") or meta.get("cores")) if x)
        found.append((f"`{path.name}`", _summary(script), command, when, machine))
    checks = sorted((RESULTS / "budget_checks").glob("*.json"))
    for path in checks:
        data = json.loads(path.read_text(encoding="utf-8"))
        meta = data.get("meta", {})
        what = f"budget check, chapter {data['chapter'][:2].lstrip('0')}: {data['verdict']}"
        found.append(
            (
                f"`budget_checks/{path.name}`",
                what,
                f"`{data['command']}`",
                str(meta.get("when", ""))[:10],
                str(meta.get("cpu", "")),
            )
        )
    return found


def make_table() -> str:
    lines = [
        "| result (`benchmarks/results/`) | what it measures | command | when | machine |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows()]
    return "\n".join(lines)


def current_table(readme: str) -> str | None:
    match = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), readme, re.DOTALL)
    return match.group(1).rstrip("\n") if match else None


def main() -> int:
    text = README.read_text(encoding="utf-8")
    if current_table(text) is None:
        print(f"README.md has no {START} ... {END} markers", file=sys.stderr)
        return 1
    new = re.sub(
        re.escape(START) + r"\n.*?" + re.escape(END), lambda _: f"{START}\n{make_table()}\n{END}", text, flags=re.DOTALL
    )
    README.write_text(new, encoding="utf-8")
    print("README.md: benchmark table written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
