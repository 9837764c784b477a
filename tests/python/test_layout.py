"""The sidecar's layout: one package per kind, imported lazily, and no import cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from lispm_sidecar.kinds import KINDS, adapter_class
from lispm_sidecar.kinds.base import KindAdapter

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "lispm_sidecar"


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module → the package's modules it imports, counting every import:
    at the top, in a function, and under `TYPE_CHECKING` alike.  Importing
    `a.b.c` counts as importing `a` and `a.b` too (their `__init__` runs),
    unless the importer is inside them itself."""
    name = package.name
    modules = {
        ".".join((name, *path.relative_to(package).with_suffix("").parts))
        .removesuffix(".__init__"): path
        for path in package.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        here = module.split(".") if is_package else module.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                source = ".".join([*base, *(node.module.split(".") if node.module else [])])
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    targets.add(submodule if submodule in modules else source)
        enclosing = {".".join(here[:i + 1]) for i in range(len(here))}
        graph[module] = {
            ".".join(target.split(".")[:i + 1])
            for target in targets if target.split(".")[0] == name
            for i in range(len(target.split(".")))
        } & modules.keys() - enclosing - {module}
    return graph


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of GRAPH, as the modules along it, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return [*path[path.index(module):], module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(graph[module]):
            if (found := visit(target)) is not None:
                return found
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        if (found := visit(module)) is not None:
            return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert {"lispm_sidecar.agent", "lispm_sidecar.kinds"} <= graph["lispm_sidecar.agents"]
    assert cycle_in(graph) is None


def test_the_cycle_check_finds_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import a\n")
    assert cycle_in(import_graph(package)) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (package / "sub" / "b.py").write_text("def f():\n    from ..a import x\n")
    assert cycle_in(import_graph(package)) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (package / "sub" / "b.py").write_text("import os\n")
    assert cycle_in(import_graph(package)) is None


def test_every_kind_is_a_package_with_its_adapter_and_watcher() -> None:
    packages = {path.parent.name for path in (PACKAGE / "kinds").glob("*/__init__.py")}
    assert packages == set(KINDS)
    for kind in KINDS:
        adapter = adapter_class(kind)
        assert issubclass(adapter, KindAdapter) and adapter.kind == kind
        assert adapter.__module__ == f"lispm_sidecar.kinds.{kind}.adapter"
        assert adapter.watcher is not KindAdapter.watcher, f"{kind} has no watcher"


def _modules_after(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", f"""
import sys
import lispm_sidecar.__main__, lispm_sidecar.app
{code}
print("\\n".join(sys.modules))
"""], capture_output=True, text=True, check=True, timeout=60)
    return set(done.stdout.split())


def _adapters(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("lispm_sidecar.kinds.")
            and m.endswith(".adapter")}


def test_the_sidecar_starts_without_any_kind_adapter() -> None:
    modules = _modules_after("")
    assert _adapters(modules) == set()
    assert "aiohttp" not in modules
    # The model dialects come with the own agent's first request.
    assert not {m for m in modules if m.startswith("lispm_sidecar.models")}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_kind_adapter_is_imported_alone(kind: str) -> None:
    modules = _modules_after(f"from lispm_sidecar.kinds import adapter_class\n"
                             f"adapter_class({kind!r})")
    assert _adapters(modules) == {f"lispm_sidecar.kinds.{kind}.adapter"}
    assert ("aiohttp" in modules) == (kind == "openclaw")
