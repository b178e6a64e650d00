"""Each layer's public API is exactly its ``__all__``."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    "name",
    [
        "contracts",
        "host",
        "host.journal",
        "host.storage",
        "host.storage.sqlite",
        "runner",
        "execution_system",
    ],
)
def test_all_names_resolve_and_nothing_public_is_unlisted(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(getattr(module, "__all__", []))
    for item in exported:
        assert hasattr(module, item), f"{name}.{item} is listed but missing"
    public = {
        attr
        for attr in vars(module)
        if not attr.startswith("_") and not isinstance(getattr(module, attr), type(importlib))
    }
    assert public <= exported, f"{name} exposes unlisted names: {sorted(public - exported)}"
