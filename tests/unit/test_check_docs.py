"""The docs check finds work-log language and links that do not resolve, and passes the
repository as it is."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_docs", ROOT / "scripts/check_docs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_work_log_language_and_dangling_links_are_named_with_their_line(
        tmp_path: Path) -> None:
    c = checker()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("# Here\n")
    page = tmp_path / "docs" / "page.md"
    diary = "session" + " 12"  # spelled apart: this file holds no work log itself
    page.write_text("Fine [here](here.md) and [there](https://example.org).\n"
                    f"As measured in {diary}, it was faster.\n"
                    "See [gone](gone.md#part) and the [anchor](#top).\n"
                    "```\n[not a link](nowhere.md)\n```\n")
    problems = c.work_log([page], tmp_path) + c.broken_links([page], tmp_path)
    assert problems == [
        f"docs/page.md:2: work-log language '{diary}' (history is git's; say what the "
        "code does today)",
        "docs/page.md:3: link 'gone.md#part' does not resolve"]


def test_the_repository_has_no_work_log_and_no_dangling_link() -> None:
    c = checker()
    files = c.scanned_files()
    assert len(files) > 100
    assert c.work_log(files) + c.broken_links(files) == []
