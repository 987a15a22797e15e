"""What every service entrypoint shares: settings from flags and env, and the run loop."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Protocol, TypeVar, Union, get_args, get_origin

from prometheus_client import CollectorRegistry, ProcessCollector
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode

from services import heap_decay
from services.telemetry import TelemetryAccess, serve_telemetry
from squall.core.control.error_reports import ErrorReports
from squall.core.control.spark_security import security_from
from squall.core.control.zookeeper_access import access_from
from squall.core.errors import ConfigError, SquallError
from squall.core.topology.code_policy import DEFAULT as DEFAULT_MODULES
from squall.core.topology.code_policy import ENV as MODULES_ENV
from squall.core.topology.code_policy import allowed_modules
from squall.core.topology.model import TopologySpec
from squall.kafka_clients import Scrubbing, load_properties
from squall.supervision import EXIT_FILE_ENV, READY_FILE_ENV

S = TypeVar("S", bound=BaseModel)


def _task_ids(v: object) -> object:
    return tuple(int(x) for x in v.replace(",", " ").split()) if isinstance(v, str) else v


#: Task ids, from a flag or env variable as "0,1" or "0 1".
TaskIds = Annotated[tuple[int, ...], BeforeValidator(_task_ids)]


def from_topology_file(data: Any, decides: Callable[[TopologySpec], dict[str, Any]],
                       env_prefix: str, placement: frozenset[str] = frozenset(),
                       flags: Mapping[str, str] | None = None) -> Any:
    """A settings model's input with what its topology file (``topology_file``) decides
    filled in. A setting the topology decides is the topology's alone: given as a flag or
    an environment variable as well, it is refused (two processes of one topology must
    not disagree on its message timeout, say); ``placement`` (which tasks, how many) is the
    worker's to give; ``flags``: a field's flag where it is not ``--field-name``."""
    if not isinstance(data, dict) or not data.get("topology_file"):
        return data
    path = Path(data["topology_file"])
    try:
        spec = TopologySpec.from_text(path.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read topology file {path}: {e}") from None
    decided = decides(spec)
    clash = sorted(k for k in data if k in decided and k not in placement)
    if clash:
        raise ConfigError("; ".join(
            f"{k} is the topology's ({decided[k]!r} in {path}): set it there, not with "
            f"{(flags or {}).get(k, '--' + k.replace('_', '-'))} or {env_prefix}{k.upper()} "
            f"({data[k]!r})" for k in clash))
    return {**decided, **data}


class Runnable(Protocol):
    def run(self, stop: threading.Event) -> None: ...


def settings_parser(cls: type[BaseModel], prog: str, description: str,
                    flags: Mapping[str, tuple[str, dict[str, Any]]] | None = None
                    ) -> argparse.ArgumentParser:
    """The command line of a settings model: a flag per field (``--field-name``), its help
    the field's description and default, so each setting is declared once, in the model.
    ``flags``: a field's own flag name and argparse options (``--edge``, repeatable).
    Fields excluded from the model's dump (the Kafka properties) get none. A flag not given
    is None, so the environment's value stands."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    for name, f in cls.model_fields.items():
        if f.exclude:
            continue
        flag, opts = (flags or {}).get(name, (f"--{name.replace('_', '-')}", {}))
        kind = _flag_type(f.annotation)
        kw: dict[str, Any] = {"dest": name, "default": None}
        if kind is bool:
            kw["action"] = argparse.BooleanOptionalAction
        elif isinstance(kind, list):
            kw["choices"] = kind
        elif kind in (int, float):
            kw["type"] = kind
        default = None if f.default_factory is not None else f.get_default()
        shown = default.value if isinstance(default, Enum) else default
        said = f.description or ""
        if not f.is_required() and shown not in (None, (), "") and "default" not in said:
            said += f" (default {shown})"
        p.add_argument(flag, help=said.strip() or None, **(kw | opts))
    return p


def _flag_type(annotation: Any) -> Any:
    """``bool``, ``int``, ``float``, the choices of a ``Literal`` or an enum, else ``str``
    (the model parses the text: paths, lists, task ids)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (UnionType, Union) and len(args) == 1:
        annotation = args[0]
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [e.value for e in annotation]
    return annotation if annotation in (bool, int, float) else str


class CodePolicy(BaseSettings):
    """What both the API and the workers read: the modules a topology's classes may come
    from (squall/core/topology/code_policy.py), one variable for both."""

    # squall/core/topology/code_policy.py: the modules a spec's classes may come from.
    # NoDecode: the variable is a comma-separated list, not JSON.
    allowed_modules: Annotated[tuple[str, ...], NoDecode] = Field(
        DEFAULT_MODULES, validation_alias=AliasChoices("allowed_modules", MODULES_ENV),
        description=(
        "the modules a topology's classes may come from, comma-separated (each with the "
        "modules under it; Squall's own are always allowed); the same for the API and the "
        "workers, best set once as SQUALL_ALLOWED_MODULES"))

    @field_validator("allowed_modules", mode="before")
    @classmethod
    def _modules(cls, v: object) -> object:
        return allowed_modules(v) if isinstance(v, str) else v


def load_settings(cls: type[S], parser: argparse.ArgumentParser,
                  argv: Sequence[str] | None, what: str) -> S:
    """Flags override env (the settings class reads env); errors name every bad field."""
    given = {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}
    try:
        if "kafka" in cls.model_fields:
            given["kafka"] = load_properties(os.environ)
        if "zookeeper_access" in cls.model_fields:
            given["zookeeper_access"] = access_from(os.environ)
        if "spark_security" in cls.model_fields:
            given["spark_security"] = security_from(os.environ)
        return cls(**given)
    except ValidationError as e:
        raise ConfigError(f"invalid {what} settings: " + "; ".join(
            f"{'.'.join(str(x) for x in err['loc']) or 'settings'}: {err['msg']}"
            for err in e.errors())) from None
    except SquallError as e:
        raise ConfigError(f"invalid {what} settings: {e}") from None


def run_service(name: str, load: Callable[[], Any],
                build: Callable[[Any, CollectorRegistry, ErrorReports], Runnable]) -> int:
    """Load settings, serve /metrics and /errors, run until SIGTERM / SIGINT (graceful), map
    errors to 2. Free heap pages go back to the system as the service runs
    (services/heap_decay.py)."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load()
        secrets = settings.kafka.secrets() if hasattr(settings, "kafka") else []
        for handler in logging.getLogger().handlers:
            handler.addFilter(Scrubbing(secrets))
        registry = CollectorRegistry()
        ProcessCollector(registry=registry)  # process_cpu_seconds_total, resident memory...
        errors = ErrorReports(secrets=secrets)
        service = build(settings, registry, errors)
        if settings.metrics_port:
            routes = service.routes() if hasattr(service, "routes") else None
            token = settings.telemetry_token if isinstance(settings, TelemetryAccess) else None
            serve_telemetry(settings.metrics_host, settings.metrics_port, registry, errors,
                            routes, token)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        heap_decay.start(stop)
        service.run(stop)
    except SquallError as e:
        print(f"squall {name}: error: {e}", file=sys.stderr)
        _exit_error(str(e))
        return 2
    except Exception as e:
        _exit_error(f"{type(e).__name__}: {e}")
        raise
    return 0



def mark_ready() -> None:
    """Tell this service's supervisor it is doing its work (a ``Command`` with ``ready``):
    its health counts from now. Nothing if it is not supervised."""
    path = os.environ.get(READY_FILE_ENV)
    if path:
        with contextlib.suppress(OSError):
            Path(path).touch()


def _exit_error(message: str) -> None:
    """The error this service exits with, for its supervisor to publish (a crash loop's
    last error); nothing if it is not supervised."""
    path = os.environ.get(EXIT_FILE_ENV)
    if path:
        with contextlib.suppress(OSError):
            Path(path).write_text(message[-2000:])
