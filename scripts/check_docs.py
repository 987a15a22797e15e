"""The docs and the code describe today's code: no work-log language, and every relative
link in the Markdown resolves.

Run by ``scripts/test.sh``; exits 1 naming each file and line at fault.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where a reader meets the project's words: docs, code, examples, scripts, deploy files.
SCANNED = ("README.md", "docs", "squall", "services", "benchmarks", "examples", "scripts",
           "tests", "deploy", "Dockerfile", "docker-compose.yml", "pyproject.toml")
SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".sh", ".json", ".java", ""}
#: The checker and its test, which must name what they look for.
SELF = ("check_docs.py", "test_check_docs.py")
#: Work-log language: history is git's.
WORK_LOG = re.compile(r"\b(session \d+|sessions? \d+(?:-\d+)?|issue #\d+|"
                      r"this session|last session|(?:first|second|third|fourth) pass)\b",
                      re.IGNORECASE)
#: A Markdown link or image to a relative target: [text](target) or ![alt](target).
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def scanned_files() -> list[Path]:
    out = []
    for name in SCANNED:
        p = ROOT / name
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += [f for f in sorted(p.rglob("*")) if f.is_file() and f.suffix in SUFFIXES
                    and "__pycache__" not in f.parts and f.name not in SELF]
    return out


def work_log(files: list[Path], root: Path = ROOT) -> list[str]:
    problems = []
    for f in files:
        try:
            text = f.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = WORK_LOG.search(line)
            if m:
                problems.append(f"{f.relative_to(root)}:{n}: work-log language {m.group(0)!r} "
                                "(history is git's; say what the code does today)")
    return problems


def broken_links(files: list[Path], root: Path = ROOT) -> list[str]:
    problems = []
    for f in files:
        if f.suffix != ".md":
            continue
        in_code = False
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue  # a URL, or an anchor in the same page
                path = target.split("#", 1)[0]
                if not (f.parent / path).exists():
                    problems.append(f"{f.relative_to(root)}:{n}: link {target!r} does not "
                                    "resolve")
    return problems


def main() -> int:
    files = scanned_files()
    problems = work_log(files) + broken_links(files)
    for p in problems:
        print(p, file=sys.stderr)
    print(f"check_docs: {len(files)} files, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
