"""Name -> builder registries, so adding a model family, strategy or workload is one module."""

from __future__ import annotations

import importlib
from typing import Callable, Dict, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A named table of entries that reports the known names when a lookup fails."""

    def __init__(self, kind: str, config_key: str):
        self.kind = kind
        self.config_key = config_key
        self._entries: Dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(entry: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = entry
            return entry

        return add

    def get(self, name: str) -> T:
        if name not in self._entries:
            known = ", ".join(sorted(self._entries))
            raise KeyError(f"unknown {self.kind} {name!r}: set {self.config_key} to one of: {known}")
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries


def load_ref(ref: str) -> Callable:
    """The object a "package.module:attr" reference names, importing its module. Registries name the
    code that needs torch this way, so the orchestrator can validate a config without importing it."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def load_plugins(modules: list[str]) -> None:
    """Import the user's modules named by `plugins=[...]`: importing one registers what it defines."""
    for module in modules:
        importlib.import_module(module)
