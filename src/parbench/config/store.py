"""Registers the typed schema with Hydra so conf/config.yaml can start from `config_schema`."""

from hydra.core.config_store import ConfigStore

from parbench.config.schema import Config


def register_schema() -> None:
    ConfigStore.instance().store(name="config_schema", node=Config)
