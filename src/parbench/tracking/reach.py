"""A tracking URI parbench cannot write to fails fast, before anything runs, with the URI and what to
do: a scheme MLflow has no store for, a server that is not there (MLflow's own HTTP client would retry
for minutes) or is not MLflow, a SQLite file in a folder that cannot be made. Later calls are kept
short too, so an outage mid-sweep costs seconds."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

CHECK_TIMEOUT_S = 3.0
# MLflow reads these per request; a user's own settings win.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
DEFAULT_STORE = "sqlite:///outputs/mlflow.db"
DATABASES = ("postgresql", "mysql", "mssql")  # SQLAlchemy stores: MLflow checks them when it connects
SUPPORTED = (f"sqlite:///path/to/mlflow.db (the default: {DEFAULT_STORE}), http(s)://host:port of an `mlflow "
             "server`, file:///path or a plain folder, databricks, or a database URI (postgresql://, mysql://, "
             "mssql://)")
AUTH_REFUSED = (401, 403)  # a server behind authentication: MLflow's client sends the credentials


class TrackingUnreachable(RuntimeError):
    """The tracking server did not answer."""


def is_remote(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def check_reachable(uri: str, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Raise TrackingUnreachable, saying what to do, unless parbench can write to uri: a store MLflow
    knows, a folder that exists or can be made, a server that answers as MLflow within timeout_s."""
    scheme = urlparse(uri).scheme
    if is_remote(uri):
        check_server(uri, timeout_s)
    elif scheme == "sqlite":
        check_folder(uri, Path(uri[len("sqlite:///"):]).parent if uri.startswith("sqlite:///") else None)
    elif scheme in ("", "file"):
        check_folder(uri, Path(urlparse(uri).path if scheme else uri))
    elif scheme.split("+")[0] not in DATABASES + ("databricks",):
        raise TrackingUnreachable(f"tracking.uri={uri}: MLflow has no store for {scheme}:// URIs, so parbench "
                                  f"cannot write there; use {SUPPORTED}")


def check_folder(uri: str, folder: Path | None) -> None:
    """The store's folder exists or can be made, and is writable."""
    if folder is None:
        raise TrackingUnreachable(f"tracking.uri={uri}: a SQLite store needs a file path after sqlite:/// ; use {SUPPORTED}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TrackingUnreachable(f"tracking.uri={uri}: cannot make its folder {folder} ({e.strerror}); "
                                  f"use a path you can write to, or {DEFAULT_STORE}") from None
    if not os.access(folder, os.W_OK):
        raise TrackingUnreachable(f"tracking.uri={uri}: its folder {folder} is not writable; use a path you can "
                                  f"write to, or {DEFAULT_STORE}")


def check_server(uri: str, timeout_s: float) -> None:
    """GET <uri>/health answers (an `mlflow server` says OK), else TrackingUnreachable."""
    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s).close()
    except urllib.error.HTTPError as e:
        if e.code not in AUTH_REFUSED:
            raise TrackingUnreachable(
                f"tracking.uri={uri} answers, but not as an MLflow tracking server (GET /health: HTTP {e.code}): "
                f"check the host and port, or use {SUPPORTED}") from None
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, "reason", e)
        port = urlparse(uri).port or 5000
        raise TrackingUnreachable(
            f"tracking.uri={uri} is not reachable ({why}). Start the server, e.g. `mlflow server --host 127.0.0.1 "
            f"--port {port} --backend-store-uri {DEFAULT_STORE}`, or leave tracking.uri out to use the default "
            f"SQLite store ({DEFAULT_STORE}).") from None
