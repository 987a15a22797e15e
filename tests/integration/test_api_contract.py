"""The API's OpenAPI document is its contract: schemathesis runs every operation, with and
without the token, against a live replica."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.cluster import TOKEN, ApiProcess

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("token", [TOKEN, None], ids=["with-token", "without-token"])
def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(
        api: ApiProcess, tmp_path: Path, token: str | None) -> None:
    """Every operation, with and without the token: no 5xx, every status and body as the
    OpenAPI document says."""
    # The coverage phase is left out: on Python 3.11.7 it crashes inside hypothesis (an AST
    # recursion SystemError in lambda descriptions), before any request is sent.
    exe = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
    auth = ["-H", f"Authorization: Bearer {token}"] if token else []
    r = subprocess.run(
        [exe, "run", f"{api.url}/openapi.json", "--checks",
         "not_a_server_error,status_code_conformance,content_type_conformance,"
         "response_schema_conformance", "--max-examples", "25",
         "--phases", "examples,fuzzing", "--workers", "2", *auth, "--seed", "1"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-12000:] + r.stderr[-2000:]
