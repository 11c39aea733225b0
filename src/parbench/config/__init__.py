"""Config schema, loading and validation (no Hydra import: workers use this too)."""


class ConfigError(ValueError):
    """A config that cannot work; the message says what to change."""
