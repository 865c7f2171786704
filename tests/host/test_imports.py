"""The package's import graph: no cycles, no module-level __getattr__ (no re-export shims)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sglang_sentinel"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    """Package modules this module imports, at module level or inside functions alike."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("sglang_sentinel"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if not target.startswith("sglang_sentinel"):
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                out.add(candidate if candidate in MODULES else target)
    return out - {name}


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {name: _imports(path, name) & MODULES.keys() for name, path in MODULES.items()}


def test_no_import_cycles() -> None:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(GRAPH[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(GRAPH):
        if node not in state:
            visit(node)
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_module_getattr() -> None:
    """A module-level __getattr__ hides where a name is defined."""
    offenders = [
        name
        for name, path in MODULES.items()
        if any(
            isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for node in ast.parse(path.read_text(encoding="utf-8")).body
        )
    ]
    assert offenders == []


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _face_names(path: Path, tree: ast.Module) -> set[str]:
    """A subpackage's `__init__` (its face) may list what it imports from its own modules."""
    if path.name != "__init__.py":
        return set()
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    }


def test_public_names_live_where_they_are_defined() -> None:
    """`__all__` lists only a module's own names: a file's name says where a definition is; a
    subpackage's `__init__` is its face and lists names of its own modules (and nothing else)."""
    reexported = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                listed = set(ast.literal_eval(node.value))
                foreign = listed - _defined(tree) - _face_names(path, tree)
                if foreign:
                    reexported[name] = sorted(foreign)
    assert reexported == {}


def test_every_module_is_on_the_architecture_map() -> None:
    """docs/architecture.md's map names every module: a newcomer finds where a thing lives."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = doc.split("```", 2)[1]  # the map: the first fenced block
    listed = {line.split()[0] for line in block.splitlines() if line.strip()}
    missing = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and path.name not in listed
    ]
    assert missing == []


# The layer table (docs/architecture.md): each top-level module or subpackage of the package,
# and the layer it stands on. A module imports only modules of its own layer's part (itself, or
# its own subpackage), the shared leaves, and parts of the layers below its own.
LEAVES = (
    "model",
    "facts",
    "fact_ranges",
    "evidence",
    "errors",
    "logs",
    "redact",
    "text",
    "logtemplates",  # the downgrade ledger's mask and diff: tracker and compare both read it
    "yamlfile",
    "serverargs",
    "compiled",  # which modules mypyc compiles (setup.py reads it): imports none of them statically
)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", *LEAVES),
    ("sources", "rules", "state"),  # state stands beside the stages: it imports only the leaves
    ("startups",),
    ("compare",),
    ("config",),
    ("outputs",),
    ("pipeline",),
    ("daemon",),
    ("cli",),
)
LAYER = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def _part(module: str) -> str:
    """The top-level module or subpackage a package module belongs to ("__init__" for the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_face(module: str) -> bool:
    return len(module.split(".")) == 2 and MODULES[module].name == "__init__.py"


def test_every_part_of_the_package_is_in_the_layer_table() -> None:
    assert sorted({_part(m) for m in MODULES} - LAYER.keys()) == []


def test_each_part_imports_only_the_layers_below_it() -> None:
    """leaves < sources, rules, state < startups < compare < config < outputs < pipeline < daemon
    < cli; the leaves import each other."""
    upward = sorted(
        f"{module} -> {dep}"
        for module, deps in GRAPH.items()
        for dep in deps
        if _part(dep) != _part(module)
        and not (LAYER[_part(module)] == 0 and LAYER[_part(dep)] == 0)
        and LAYER[_part(dep)] >= LAYER[_part(module)]
    )
    assert upward == []


def test_a_subpackage_is_imported_from_outside_only_through_its_face() -> None:
    """Its `__init__` names what it offers; nothing outside reaches past it into a module."""
    past = sorted(
        f"{module} -> {dep}"
        for module, deps in GRAPH.items()
        for dep in deps
        if _part(dep) != _part(module) and len(dep.split(".")) > 2
    )
    assert past == []


def test_the_dashboard_generator_is_not_part_of_the_package() -> None:
    """tools/grafana.py runs at build time (`make dashboard`); nothing in the package imports it."""
    importers = sorted(
        name
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.ImportFrom) and not node.level and (node.module or "") == "tools")
        or (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tools."))
        or (
            isinstance(node, ast.Import)
            and any(a.name.split(".")[0] == "tools" for a in node.names)
        )
    )
    assert importers == []
    assert not (PACKAGE / "grafana.py").exists()
