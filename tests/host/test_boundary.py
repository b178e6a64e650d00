"""The Host cannot reach coordinator-only capabilities, and no LangGraph type leaks out."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import host
from host import CoordinatorHost

ROOT = Path(__file__).resolve().parents[2]


def _imports(package: Path) -> set[str]:
    found: set[str] = set()
    for path in [package] if package.is_file() else package.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
    return found


def test_host_imports_neither_admission_custody_nor_cli() -> None:
    imported = _imports(ROOT / "host")
    assert not any(m.split(".")[0] in {"execution_system", "runner"} for m in imported)


def test_only_host_langgraph_imports_langgraph() -> None:
    for package in ("contracts", "runner", "execution_system"):
        assert not any(m.startswith("langgraph") for m in _imports(ROOT / package)), package
    adapter = ROOT / "host" / "langgraph"
    for path in (ROOT / "host").rglob("*.py"):
        if adapter not in path.parents:
            assert not any(m.startswith("langgraph") for m in _imports(path)), path


def test_the_host_capability_exposes_no_admission_or_substrate_types() -> None:
    members = {name for name, _ in inspect.getmembers(CoordinatorHost) if not name.startswith("_")}
    assert members == {
        "run",
        "submit",
        "queued_deliveries",
        "drive_queued",
        "runner_heartbeat",
        "runner_gone",
        "runners",
        "answer",
        "resolve",
        "status",
        "inspect",
        "admitted",
        "journal_lines",
        "delivery_document",
        "record",
        "deliveries",
        "delivery_page",
        "close",
        "stop",
        "recover",
        "retire",
        "cancel",
        "invalidate",
        "needs_directive",
        "lease_counts",
        "goals",
    }
    for name in members:
        member = getattr(CoordinatorHost, name)
        source = inspect.getsource(getattr(member, "fget", member))
        assert "langgraph" not in source.lower() and "RunnableConfig" not in source
    assert not hasattr(host, "admit") and not hasattr(host, "load_graph")
