"""The source tree keeps the design DEVELOPERS.md describes: no import circles (imports made only
for type checking count too), imports within the server flowing one way, and every package
saying at its top what it owns."""

from __future__ import annotations

import ast
from pathlib import Path

import autorecap

ROOT = Path(autorecap.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(("autorecap", *parts)).removesuffix(".__init__")
        found[name] = path
    return found


def _imports() -> dict[str, set[str]]:
    """Each module's imports of other autorecap modules (a package counts as its
    `__init__`)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    graph[name].add(target if target in modules else node.module)
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names)
        graph[name] = {t for t in graph[name] if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_there_are_no_import_circles() -> None:
    assert _cycles(_imports()) == []


def _part(module: str) -> str:
    """The server's part a module belongs to: `proxy`, `api`, `web`, `chats`, or the module."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "server" else ""


FORBIDDEN = {
    "chats": {"proxy", "api", "web", "app"},
    "proxy": {"api", "web", "app"},
    "api": {"proxy", "web", "app"},
    "web": {"proxy", "api", "chats", "app"},
}


def test_the_server_imports_flow_one_way() -> None:
    wrong = []
    for module, targets in _imports().items():
        part = _part(module)
        for target in targets:
            if target.startswith("autorecap.server") and _part(target) in FORBIDDEN.get(part, ()):
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_nothing_below_the_server_imports_it() -> None:
    wrong = [
        f"{module} -> {target}"
        for module, targets in _imports().items()
        if not module.startswith(("autorecap.server", "autorecap.cli"))
        for target in targets
        if target.startswith(("autorecap.server", "autorecap.cli"))
    ]
    assert wrong == []


def test_every_package_says_what_it_owns() -> None:
    for path in ROOT.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert len(doc or "") > 40, f"{path.relative_to(ROOT)} has no docstring"
