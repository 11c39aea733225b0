"""A tracking server that is not there fails fast, with the URI and what to do: MLflow's own HTTP
client would retry for minutes. Later calls are kept short too, so an outage mid-sweep costs seconds."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from urllib.parse import urlparse

CHECK_TIMEOUT_S = 3.0
# MLflow reads these per request; a user's own settings win.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
DEFAULT_STORE = "sqlite:///outputs/mlflow.db"


class TrackingUnreachable(RuntimeError):
    """The tracking server did not answer."""


def is_remote(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def check_reachable(uri: str, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Raise TrackingUnreachable, saying what to do, unless the server at uri answers within timeout_s."""
    if not is_remote(uri):
        return
    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return  # it answered (a proxy or another route): reachable
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, "reason", e)
        port = urlparse(uri).port or 5000
        raise TrackingUnreachable(
            f"tracking.uri={uri} is not reachable ({why}). Start the server, e.g. `mlflow server --host 127.0.0.1 "
            f"--port {port} --backend-store-uri {DEFAULT_STORE}`, or leave tracking.uri out to use the default "
            f"SQLite store ({DEFAULT_STORE}).") from None
