"""Secrets never reach the store: values of secret-looking environment variables (tokens, keys,
passwords) and secret-looking launch.env entries are masked in params, tags and text artifacts."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH", re.I)
MASK = "***"
MIN_LEN = 6  # shorter values ("1", "true") would mask ordinary text
TEXT_SUFFIXES = {".yaml", ".yml", ".json", ".jsonl", ".log", ".txt", ".csv", ".md"}
MAX_TEXT_BYTES = 50_000_000


def secret_values() -> list[str]:
    """Values of this process's secret-looking environment variables, longest first."""
    found = {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_LEN}
    return sorted(found, key=len, reverse=True)


def scrub(text: str, secrets: list[str] | None = None) -> str:
    for value in secret_values() if secrets is None else secrets:
        text = text.replace(value, MASK)
    return text


def scrub_mapping(items: dict[str, str]) -> dict[str, str]:
    """Mask secret values anywhere, and whole values of secret-named keys (launch.env.HF_TOKEN)."""
    secrets = secret_values()
    return {k: MASK if SECRET_NAME.search(k.rsplit(".", 1)[-1]) and k.startswith("launch.env.")
            else scrub(str(v), secrets) for k, v in items.items()}


def scrubbed_file(path: Path) -> Path:
    """path itself, or a masked copy (same name, in a temp dir) when the text holds a secret."""
    secrets = secret_values()
    if not secrets or path.suffix not in TEXT_SUFFIXES or path.stat().st_size > MAX_TEXT_BYTES:
        return path
    text = path.read_text(errors="replace")
    clean = scrub(text, secrets)
    if clean == text:
        return path
    copy = Path(tempfile.mkdtemp(prefix="parbench-scrub-")) / path.name
    copy.write_text(clean)
    return copy
