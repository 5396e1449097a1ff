"""The import graph of tilewise and tdl_ops: no cycles, every import down the layer order of
docs/ARCHITECTURE.md (the fenced block after "Layer order"), no private names across packages.

Reads the sources with ``ast`` (nothing is imported): every import statement counts, function-local
ones included; relative imports are resolved and ``from pkg import name`` is an import of the
module ``pkg.name`` when there is one. Importing ``a.b.c`` also runs ``a`` and ``a.b`` first; those
implicit edges are not counted (every module would then depend on the façade).
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROOTS = {"tilewise": ROOT / "python" / "tilewise", "tdl_ops": ROOT / "tdl_ops"}
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"

# Private modules any module may import: the extension, its build-time configuration, build
# information and the one shared utility module (docs/ARCHITECTURE.md, "Private modules").
SHARED_PRIVATE = {"_core", "_blas_config", "_mpi_config", "_build_info", "_util"}

pytestmark = pytest.mark.skipif(not ARCHITECTURE.exists() or not ROOTS["tdl_ops"].is_dir(),
                                reason="needs the source tree (docs/ARCHITECTURE.md, tdl_ops/)")


# ----- reading the sources -------------------------------------------------------------------------


def find_modules(roots: dict[str, pathlib.Path]) -> dict[str, tuple[pathlib.Path, bool]]:
    """Module name -> (source file, is a package) for every .py file under the roots."""
    modules = {}
    for top, base in roots.items():
        for path in sorted(base.rglob("*.py")):
            parts = [top, *path.relative_to(base).with_suffix("").parts]
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            modules[".".join(parts)] = (path, is_package)
    return modules


def imports_of(name: str, tree: ast.AST, is_package: bool, known) -> list[tuple[str, str | None, int]]:
    """(module imported, name taken from it or None, line) for every import statement in ``tree``.

    ``from pkg import x`` yields (``pkg.x``, None) when ``known(pkg.x)`` (a submodule), else (pkg, x).
    """
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            if source == "__future__":
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if alias.name != "*" and known(sub):
                    found.append((sub, None, node.lineno))
                else:
                    found.append((source, alias.name, node.lineno))
    return found


def ours(module: str) -> bool:
    return module.partition(".")[0] in ROOTS


def build_graph(roots=ROOTS):
    """(edges: module -> {imported module: first line}, records: [(importer, module, name, line)])."""
    modules = find_modules(roots)

    def known(m):  # a source module, or the extension / generated module of tilewise
        return m in modules or m in {f"tilewise.{p}" for p in SHARED_PRIVATE}

    edges: dict[str, dict[str, int]] = {m: {} for m in modules}
    records = []
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for module, attr, line in imports_of(name, tree, is_package, known):
            if not ours(module):
                continue
            records.append((name, module, attr, line))
            if module != name:
                edges[name].setdefault(module, line)
    return edges, records


# ----- checks (plain functions, unit-tested below on small graphs) ---------------------------------


def find_cycle(edges: dict[str, dict]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None: depth-first search, colouring modules grey while
    they are on the stack."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(edges, WHITE)
    for start in sorted(edges):
        if colour[start] != WHITE:
            continue
        stack = [(start, iter(sorted(edges[start])))]
        path = [start]
        colour[start] = GREY
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                colour[node] = BLACK
            elif colour.get(child, BLACK) == GREY:
                return path[path.index(child):] + [child]
            elif colour.get(child) == WHITE:
                colour[child] = GREY
                path.append(child)
                stack.append((child, iter(sorted(edges.get(child, ())))))
    return None


def parse_layers(text: str) -> list[list[str]]:
    """The layer order from ARCHITECTURE.md: the first fenced block after a "Layer order" heading,
    one layer per line, lowest first, module prefixes separated by spaces ("#" starts a comment)."""
    m = re.search(r"^#+ *Layer order.*?^```[a-z]*\n(.*?)^```", text, re.M | re.S)
    if m is None:
        raise AssertionError("docs/ARCHITECTURE.md has no fenced block after a 'Layer order' heading")
    layers = []
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].split()
        if line:
            layers.append(line)
    return layers


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """Index of the layer whose longest prefix names ``module`` (a prefix names itself and its
    submodules; the bare package name ``tilewise`` names only the façade, tilewise/__init__.py)."""
    best, best_len = None, -1
    for i, prefixes in enumerate(layers):
        for p in prefixes:
            covers = module == p or (module.startswith(p + ".") and p != "tilewise")
            if covers and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def layer_violations(edges: dict[str, dict], layers: list[list[str]]) -> list[str]:
    problems = []
    for src in sorted(edges):
        ls = layer_of(src, layers)
        if ls is None:
            problems.append(f"{src}: in no layer of docs/ARCHITECTURE.md")
            continue
        for dst, line in sorted(edges[src].items()):
            ld = layer_of(dst, layers)
            if ld is None:
                problems.append(f"{src}:{line} imports {dst}, which is in no layer of docs/ARCHITECTURE.md")
            elif ld > ls:
                problems.append(f"{src}:{line} imports {dst}: layer '{' '.join(layers[ld])}' lies above "
                                f"layer '{' '.join(layers[ls])}'")
    return problems


def private_violations(records) -> list[str]:
    """Private modules and names imported across packages: allowed are SHARED_PRIVATE anywhere, and a
    package's own private modules (``_x.py`` beside the importer) with their private names."""
    problems = []
    for importer, module, attr, line in records:
        importer_package = importer.rpartition(".")[0]
        last = module.rpartition(".")[2]
        own_private = last.startswith("_") and module.rpartition(".")[0] in (importer_package, importer)
        if last.startswith("_") and last not in SHARED_PRIVATE and not own_private:
            problems.append(f"{importer}:{line} imports the private module {module}")
        if attr and attr.startswith("_") and not attr.startswith("__") and last not in SHARED_PRIVATE \
                and not own_private:
            problems.append(f"{importer}:{line} imports the private name {attr} from {module}")
    return problems


# ----- the checks on the real sources --------------------------------------------------------------


def test_no_import_cycles():
    edges, _ = build_graph()
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_imports_follow_the_layer_order():
    edges, _ = build_graph()
    layers = parse_layers(ARCHITECTURE.read_text())
    problems = layer_violations(edges, layers)
    assert not problems, "imports against the layer order of docs/ARCHITECTURE.md:\n" + "\n".join(problems)


def test_no_private_imports_across_packages():
    _, records = build_graph()
    problems = private_violations(records)
    assert not problems, "\n".join(problems)


def test_nothing_imports_the_facade():
    _, records = build_graph()
    bad = [f"{i}:{line} imports the façade 'tilewise'" for i, m, _, line in records if m == "tilewise"]
    assert not bad, "\n".join(bad)


def test_the_runtime_does_not_search():
    """exec/ takes plans; building its calibration plan needs no planner (docs/ARCHITECTURE.md)."""
    edges, _ = build_graph()
    bad = [f"{m} imports {d}" for m, ds in edges.items() if m.startswith("tilewise.exec") for d in ds
           if d.startswith("tilewise.plan.search")]
    assert not bad, "\n".join(bad)


def test_the_graph_is_read():
    """The walk sees what it must: function-local imports, relative imports, from-imports of modules."""
    edges, _ = build_graph()
    assert "tilewise.tdl.registry" in edges["tilewise.graph.autodiff"]
    assert "tilewise.plan.plot" in edges["tilewise.plan.plan"]  # function-local, relative
    assert "tilewise.tdl" in edges["tdl_ops.elementwise"]  # import tilewise.tdl as tw
    assert "tilewise._core" in edges["tilewise.graph.graph"]  # from .. import _core
    assert "tdl_ops" in edges["tilewise"]


# ----- the checks can fail ---------------------------------------------------------------------------


def test_find_cycle_on_small_graphs():
    assert find_cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {}}) is None
    assert find_cycle({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": 1, "c": 1}, "b": {"d": 1}, "c": {"d": 1}, "d": {}}) is None  # a diamond
    assert find_cycle({"x": {}, "a": {"b": 1}, "b": {"b2": 1}, "b2": {"b": 1}}) == ["b", "b2", "b"]


def test_layer_check_on_a_small_graph():
    layers = [["tilewise._core"], ["tilewise.tdl"], ["tilewise.graph"], ["tilewise"]]
    assert layer_of("tilewise", layers) == 3
    assert layer_of("tilewise.graph.graph", layers) == 2
    assert layer_of("tilewise.other", layers) is None  # the façade's name covers only itself
    ok = {"tilewise.graph.graph": {"tilewise.tdl.registry": 1, "tilewise._core": 2}, "tilewise": {"tilewise.tdl": 1}}
    assert layer_violations(ok, layers) == []
    bad = {"tilewise.tdl.operator": {"tilewise.graph.graph": 7}}
    [problem] = layer_violations(bad, layers)
    assert "tilewise.tdl.operator:7 imports tilewise.graph.graph" in problem


def test_imports_are_resolved(tmp_path):
    pkg = tmp_path / "tilewise"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .sub import mod\n")
    (pkg / "_util.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text(
        "from .. import _util\nfrom ..sub import other\n\ndef f():\n    from .other import _hidden\n")
    (pkg / "sub" / "other.py").write_text("import tilewise.sub.mod\n")
    edges, records = build_graph({"tilewise": pkg})
    assert edges["tilewise.sub.mod"] == {"tilewise._util": 1, "tilewise.sub.other": 2}
    assert edges["tilewise.sub.other"] == {"tilewise.sub.mod": 1}
    assert find_cycle(edges) == ["tilewise.sub.mod", "tilewise.sub.other", "tilewise.sub.mod"]
    assert private_violations(records) == [
        "tilewise.sub.mod:5 imports the private name _hidden from tilewise.sub.other"]


def test_layer_order_is_documented():
    layers = parse_layers(ARCHITECTURE.read_text())
    flat = [p for layer in layers for p in layer]
    for stage in ("tilewise.tdl", "tilewise.graph", "tilewise.plan", "tilewise.exec", "tdl_ops", "tilewise"):
        assert stage in flat
    assert flat.index("tilewise.tdl") < flat.index("tilewise.graph") < flat.index("tilewise.plan") \
        < flat.index("tilewise.exec") < flat.index("tdl_ops") < flat.index("tilewise")
