"""What every API command of the CLI shares: ``--api``, ``--token``, ``--output``, the
client, and printing an answer as a table or as JSON."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from squall.core.errors import SquallError

if TYPE_CHECKING:
    from squall.client import ApiClient


def client_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--api", default=os.environ.get("SQUALL_API_URL", "http://127.0.0.1:8080"),
                    help="API URL (env SQUALL_API_URL; default http://127.0.0.1:8080)")
    sp.add_argument("--token", default=os.environ.get("SQUALL_API_TOKEN"),
                    help="bearer token (env SQUALL_API_TOKEN)")
    sp.add_argument("-o", "--output", choices=("table", "json"), default="table",
                    help="table (default) for people, or the API's answer as JSON for "
                    "scripts")


def read_file(path: Path) -> str:
    """A file the user named (a topology), or an error saying why it cannot be read."""
    try:
        return path.read_text()
    except OSError as e:
        raise SquallError(f"cannot read {path}: {e}") from None


def api_client(args: argparse.Namespace) -> ApiClient:
    """The REST API's client, as ``--api`` and ``--token`` say."""
    from squall.client import ApiClient

    return ApiClient(args.api, args.token)


def show(args: argparse.Namespace, data: Any, table: Callable[[Any], str]) -> None:
    """``data`` as JSON with ``--output json``, else as ``table`` renders it."""
    print(json.dumps(data, indent=2) if args.output == "json" else table(data))
