"""The API's settings: env (``SQUALL_API_*``) and flags, validated once."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.api.roles import MIN_TOKEN, Role
from services.common import CodePolicy, load_settings, settings_parser
from services.telemetry import TelemetryAccess
from squall.core.control.client_properties import ClientProperties
from squall.core.control.endpoints import web_url
from squall.core.control.zookeeper_access import ZooKeeperAccess
from squall.kafka_clients import KafkaClients


class ApiSettings(CodePolicy, TelemetryAccess):
    """An API replica. Each field is a flag (``--field-name``) and a variable
    (``SQUALL_API_FIELD_NAME``)."""

    model_config = SettingsConfigDict(env_prefix="SQUALL_API_", frozen=True, extra="forbid")

    zookeeper: str = Field("127.0.0.1:2181", description="ZooKeeper connect string")
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka, for /readyz and "
                                   "the teardowns of killed topologies")
    # The user's Kafka client properties (SQUALL_KAFKA_*; load_settings fills it).
    kafka: ClientProperties = Field(default_factory=ClientProperties, exclude=True)
    # Who may use Squall's tree in ZooKeeper (SQUALL_ZOOKEEPER_*; load_settings fills it).
    zookeeper_access: ZooKeeperAccess = Field(default_factory=ZooKeeperAccess, exclude=True)
    host: str = Field("127.0.0.1", description="listen address")
    port: int = Field(8080, ge=0, le=65535, description="listen port")
    advertise_url: str | None = Field(
        None, description="how the other replicas reach this one (default http://host:port, "
        "https with TLS)")
    tls_cert: Path | None = Field(None, description=(
        "serve HTTPS with this certificate (PEM, with its chain); off the laptop, or behind "
        "a proxy that terminates TLS"))
    tls_key: Path | None = Field(None, description="the certificate's private key (PEM)")
    tls_ca: Path | None = Field(None, description=(
        "the CA file the other replicas' certificates are checked against when this one "
        "forwards a write (default: the system's)"))
    token: SecretStr | None = Field(None, description=(
        "the admin's bearer token: every route, submitting included (prefer the environment "
        "variable)"))
    operator_token: SecretStr | None = Field(None, description=(
        "the operator's bearer token: activate, deactivate, rebalance, kill, replay dead "
        "letters, and the reads"))
    reader_token: SecretStr | None = Field(None, description=(
        "the reader's bearer token: the reads, when they need a token"))
    allow_anonymous: bool = Field(False, description="accept writes without a token "
                                  "(development only)")
    reads_need_token: bool = Field(
        False, description="the reads (Storm UI's routes, /topologies, /workers, the page) "
        "need the token too; by default they are open, as Storm UI's are, for monitoring "
        "scripts and dashboards")
    session_timeout_s: float = Field(10.0, ge=2, le=120, description="ZooKeeper session "
                                     "timeout")
    scrape_timeout_s: float = Field(1.0, gt=0, le=30, description=(
        "how long a scrape of a worker's metrics may take"))
    stats_interval_s: float = Field(2.0, gt=0, le=300, description=(
        "how often the workers' metrics are gathered for the statistics routes"))
    grafana_url: str | None = Field(None, max_length=2000, description=(
        "Grafana's URL, for the topology page's links to its dashboards"))
    lag_interval_s: float = Field(10.0, gt=0, le=300, description=(
        "how often the spouts' lag is read from Kafka (/api/v1/topology/:id/lag, /metrics)"))
    leader_interval_s: float = Field(0.5, gt=0, le=30, description=(
        "how often the leader's round runs when nothing wakes it"))

    @field_validator("grafana_url")
    @classmethod
    def _grafana(cls, v: str | None) -> str | None:
        if v is not None and not web_url(v):
            raise ValueError("grafana_url must be an http(s) URL with a host and no user")
        return v

    @model_validator(mode="after")
    def _tls(self) -> ApiSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together (the certificate and its key)")
        for name in ("tls_cert", "tls_key", "tls_ca"):
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"{name}: {path} is not a readable file")
        return self

    @model_validator(mode="after")
    def _auth(self) -> ApiSettings:
        if self.token is None and not self.allow_anonymous:
            raise ValueError("a token is required for the mutating routes (--token or "
                             "SQUALL_API_TOKEN); --allow-anonymous turns that off for development")
        if self.reads_need_token and self.token is None:
            raise ValueError("reads_need_token needs a token (--token or SQUALL_API_TOKEN)")
        if self.token is None and (self.operator_token or self.reader_token):
            raise ValueError("the operator's and reader's tokens need the admin's "
                             "(SQUALL_API_TOKEN)")
        values = [v for v in self.tokens().values()]
        for role, value in self.tokens().items():
            if len(value) < MIN_TOKEN:
                raise ValueError(f"the {role} token must be at least {MIN_TOKEN} characters "
                                 "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
        if len(set(values)) != len(values):
            raise ValueError("each role needs a token of its own")
        return self

    def tokens(self) -> dict[Role, str]:
        """Each role's token, for the roles given one."""
        given = {Role.ADMIN: self.token, Role.OPERATOR: self.operator_token,
                 Role.READER: self.reader_token}
        return {r: t.get_secret_value() for r, t in given.items() if t is not None}

    @property
    def url(self) -> str:
        scheme = "https" if self.tls_cert is not None else "http"
        return self.advertise_url or f"{scheme}://{self.host}:{self.port}"

    def forwarding_verify(self) -> ssl.SSLContext | bool:
        """How a forwarded write checks the leader's certificate."""
        return ssl.create_default_context(cafile=str(self.tls_ca)) if self.tls_ca else True

    @property
    def clients(self) -> KafkaClients:
        """This service's Kafka clients: its brokers and the user's properties."""
        return KafkaClients(self.bootstrap_servers, self.kafka)


def parse_args(argv: Sequence[str] | None = None) -> ApiSettings:
    p = settings_parser(
        ApiSettings, "squall api",
        "Serve the REST API for topology control (FastAPI on uvicorn). Every flag can also "
        "be set as SQUALL_API_<NAME> in the environment.")
    return load_settings(ApiSettings, p, argv, "api")
