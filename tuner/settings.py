"""Settings from the environment (prefix TUNER_) with embedded defaults."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def parse_nodes(text: str) -> list[dict[str, float]]:
    """A JSON list of node resources: [{"CPU": 16, "GPU": 1}, ...]; ValueError if not."""
    try:
        nodes = json.loads(text)
        if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
            raise ValueError("not a list of objects")
        return [{str(k): float(v) for k, v in n.items()} for n in nodes]
    except (ValueError, TypeError) as err:
        raise ValueError(
            f'a JSON list of node resources such as [{{"CPU": 16, "GPU": 1}}]: {err}'
        ) from None


class Settings(BaseSettings):
    """Every knob of the service; `TUNER_<NAME>` sets one."""

    model_config = SettingsConfigDict(env_prefix="TUNER_", extra="ignore", populate_by_name=True)

    data_dir: Path = Field(
        Path.home() / ".tuner",
        description="Where everything lives by "
        "default: Tune storage, the SQLite store, MLflow's db and artifacts.",
    )
    ray_address: str | None = Field(
        None,
        description="An existing Ray cluster, as Ray's job client takes it: its dashboard's "
        "http(s):// URL (the Jobs API, e.g. http://head:8265), its GCS address (head:6379), "
        "`auto` (the cluster started on this machine) or a Ray Client address "
        "(ray://head:10001). The last three are resolved to the dashboard through Ray when "
        "first used, so the cluster must be up then. Empty: a local Ray started for you.",
    )
    storage_path: str | None = Field(
        None,
        description="Tune trial storage (a shared path or "
        "an object-store URI); default <data_dir>/ray_results.",
    )
    mlflow_tracking_uri: str | None = Field(
        None, description="MLflow server URL or DB URI; default sqlite:////<data_dir>/mlflow.db."
    )
    mlflow_ui_url: str = Field(
        "http://127.0.0.1:5000",
        description="Where people open the MLflow UI (links in the API and web page).",
    )
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the store; default sqlite:////<data_dir>/tuner.db "
        "(Postgres works too).",
    )
    max_running_experiments: int = Field(
        2, ge=1, description="Sweeps running at once; the rest wait QUEUED in submission order."
    )
    api_token: str | None = Field(
        None, description="When set, every route but /healthz needs 'Authorization: Bearer'."
    )
    stop_timeout_s: float = Field(
        60, gt=0, description="A stopping sweep whose Ray Job still runs after this is killed."
    )
    max_attempts: int = Field(
        3, ge=1, description="Driver launches per sweep before a dead driver means FAILED."
    )
    ray_request_timeout_s: float = Field(
        30, gt=0, description="Deadline of each request to the Ray Jobs / state API."
    )
    cluster_fit_check: bool = Field(
        True,
        description="Reject a sweep whose one trial needs more CPUs / GPUs / custom "
        "resources than the cluster's alive nodes have (422 at submit; the driver and "
        "`tuner run` check again). An autoscaling cluster is checked against what it can "
        "grow to: list the nodes it can add in TUNER_CLUSTER_MAX_NODES. Off: no check, "
        "e.g. for a cluster whose node types you cannot list.",
    )
    cluster_max_nodes: str | None = Field(
        None,
        description="An autoscaling cluster: the nodes it can add, as a JSON list of node "
        'resources (e.g. \'[{"CPU": 16, "GPU": 1}, {"CPU": 16, "GPU": 1}]\' for a GPU '
        "worker group of up to two). The fit check counts them beside the alive nodes.",
    )
    poll_interval_s: float = Field(1.0, gt=0, description="Supervisor period (s).")
    max_body_bytes: int = Field(1_048_576, gt=0, description="Largest request body accepted.")
    embedded_num_cpus: int | None = Field(
        None, description="CPUs of the embedded Ray head (default: all of this machine)."
    )
    driver_python: str | None = Field(
        None,
        description="Python that runs a sweep's driver on the cluster; default this "
        "interpreter for an embedded or loopback cluster, else `python` on the head's PATH.",
    )
    allowed_modules: str = Field(
        "",
        validation_alias=AliasChoices(
            "TUNER_ALLOWED_MODULES", "TUNER_ENV_MODULES", "allowed_modules", "env_modules"
        ),
        description="Comma-separated module prefixes whose code a spec may name by import "
        "path 'module:Name' (envs, callbacks, RLlib classes); empty: none, only gymnasium "
        "ids and RLlib's own classes by name. TUNER_ENV_MODULES is the old name. Such "
        "code runs on the cluster: allow only packages you trust and have installed there.",
    )
    allowed_hosts: str | None = Field(
        None,
        description="Comma-separated Host names the API answers besides the bind host and "
        "localhost (DNS-rebinding guard); '*' turns the check off.",
    )
    max_trials: int = Field(
        1000, ge=1, description="Most search trials one sweep may make (grid x num_samples)."
    )
    max_asha_rungs: int = Field(
        30,
        ge=1,
        description="Most rungs a sweep's ASHA scheduler may make (1 + log(max_t / "
        "grace_period) / log(reduction_factor)); more is a 422 on `scheduler` (and an error "
        "of `tuner validate`, `plan` and `run`).",
    )
    max_active_sweeps: int = Field(
        100,
        ge=1,
        description="Most sweeps queued or running at once, per token: the service has one "
        "(TUNER_API_TOKEN), so per service. Another POST is a 429 until one ends.",
    )
    view_cache_s: float = Field(
        0.5,
        ge=0,
        description="How long a polled sweep / trials / metrics view is served from memory. "
        "A view polled in the last 5 s is rendered again in the background every half of "
        "this, so polls do not wait for renders; another is rendered by the next poll, and "
        "polls arriving meanwhile get the kept view at once if it is under 5 times this old. "
        "A sweep view that finds the status or answer changed drops the sweep's other views.",
    )
    embedded_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="CPU niceness of the embedded Ray head and its trials, so "
        "the API stays responsive while training takes every core (0: same priority).",
    )
    host: str = Field("127.0.0.1", description="Address `tuner serve` binds.")
    port: int = Field(8000, description="Port `tuner serve` binds.")

    @field_validator("storage_path")
    @classmethod
    def _plain_uri(cls, value: str | None) -> str | None:
        if value and ("?" in value or "#" in value):
            raise ValueError(
                f"{value!r}: no query or fragment; give an S3-compatible endpoint as "
                "AWS_ENDPOINT_URL instead"
            )
        return value

    @field_validator("ray_address")
    @classmethod
    def _ray_address(cls, value: str | None) -> str | None:
        # The forms Ray's JobSubmissionClient takes. Only their shape is checked here (no
        # cluster needed); tuner.launcher resolves all but the URL through Ray at first use.

        def host_port(text: str, *, port_needed: bool) -> bool:
            """host:port, an IPv6 host in brackets, the port 1 to 65535 (a URL's scheme
            implies its port: there it may be left out)."""
            if text.startswith("["):
                host, bracket, tail = text[1:].partition("]")
                if not bracket or (tail and not tail.startswith(":")):
                    return False
                colon, port = bool(tail), tail[1:]
            elif text.count(":") > 1:  # an IPv6 address without its brackets
                return False
            else:
                host, colon_text, port = text.partition(":")
                colon = bool(colon_text)
            if not host or any(ch.isspace() or ch in "/?#@" for ch in host):
                return False
            if not colon:
                return not port_needed
            return port.isdigit() and 0 < int(port) < 65536

        value = (value or "").strip()
        if not value or value == "auto":
            return value or None
        scheme, sep, rest = value.partition("://")
        if sep:
            authority = rest.split("/", 1)[0].rpartition("@")[2]  # user:password@ aside
            if scheme in ("http", "https", "ray") and host_port(authority, port_needed=False):
                return value
        elif host_port(value, port_needed=True):
            return value  # a GCS address
        raise ValueError(
            f"{value!r} is no Ray address: give the dashboard's URL (http://HEAD:8265), the "
            "GCS address (HEAD:6379), auto (the cluster started on this machine) or a Ray "
            "Client address (ray://HEAD:10001)"
        )

    @field_validator("cluster_max_nodes")
    @classmethod
    def _node_list(cls, value: str | None) -> str | None:
        if value:
            parse_nodes(value)
        return value

    @property
    def growth_nodes(self) -> list[dict[str, float]]:
        """The nodes an autoscaling cluster can add (TUNER_CLUSTER_MAX_NODES)."""
        return parse_nodes(self.cluster_max_nodes) if self.cluster_max_nodes else []

    @property
    def data_path(self) -> Path:
        """The data dir as an absolute path."""
        return self.data_dir.expanduser().absolute()

    @property
    def allowed_module_list(self) -> list[str]:
        """TUNER_ALLOWED_MODULES as a list of module prefixes."""
        return [m.strip() for m in self.allowed_modules.split(",") if m.strip()]

    @property
    def tracking_uri(self) -> str:
        """MLflow tracking URI: the configured one, or an absolute SQLite file."""
        return self.mlflow_tracking_uri or f"sqlite:///{self.data_path / 'mlflow.db'}"

    @property
    def artifact_root(self) -> str:
        """Where MLflow puts artifacts of experiments we create in the embedded default."""
        return (self.data_path / "mlflow-artifacts").as_uri()

    @property
    def store_url(self) -> str:
        """SQLAlchemy URL of the store."""
        return self.database_url or f"sqlite:///{self.data_path / 'tuner.db'}"

    @property
    def tune_storage(self) -> str:
        """Tune's storage: an object-store URI as given, or an absolute local path."""
        if self.storage_path and "://" in self.storage_path:
            return self.storage_path
        if self.storage_path:
            return str(Path(self.storage_path).expanduser().absolute())
        return str(self.data_path / "ray_results")
