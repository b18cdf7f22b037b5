"""Which way imports go (README › Layout): every import statement of the project's packages, read with ast."""

from __future__ import annotations

import ast

import pytest

from conftest import PROJECT_ROOT

PACKAGES = ("speecheq_metric", "speecheq_dataset", "builders", "eval_scripts", "speecheq_cli")
# package -> the packages of ours it may import (itself always allowed)
ALLOWED = {
    "speecheq_metric": set(),
    "speecheq_dataset": set(),
    "builders": {"speecheq_dataset", "speecheq_metric"},
    "eval_scripts": {"speecheq_dataset", "speecheq_metric"},
    "speecheq_cli": {"speecheq_dataset", "speecheq_metric", "builders", "eval_scripts"},
}


def imported_packages(path) -> set[str]:
    """Top-level packages of ours imported anywhere in a file (module level or inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[0] for name in names if name.split(".")[0] in PACKAGES}
    return found


def edges() -> list[tuple[str, str, str]]:
    """(package, imported package, file) for every cross-package import."""
    out = []
    for package in PACKAGES:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            for target in imported_packages(path) - {package}:
                out.append((package, target, str(path.relative_to(PROJECT_ROOT))))
    return out


def test_every_package_imports_only_downward():
    wrong = [(source, target, where) for source, target, where in edges() if target not in ALLOWED[source]]
    assert not wrong, "imports against the layering:\n" + "\n".join(f"  {w}: {s} -> {t}" for s, t, w in wrong)


@pytest.mark.parametrize("source, target", [("builders", "eval_scripts"), ("eval_scripts", "builders"),
                                            ("speecheq_metric", "speecheq_dataset"), ("speecheq_dataset", "eval_scripts")])
def test_the_forbidden_directions_really_are_checked(source, target, tmp_path):
    # The checker itself must see an import hidden inside a function.
    path = tmp_path / "m.py"
    path.write_text(f"def f():\n    from {target}.x import y\n    return y\n")
    assert target in imported_packages(path) and target not in ALLOWED[source]


def test_the_graph_has_no_cycles():
    graph: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for source, target, _ in edges():
        graph[source].add(target)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start])

    assert not [p for p in PACKAGES if reaches(p, p, {p})]
