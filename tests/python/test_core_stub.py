"""python/tilewise/_core.pyi is complete and current: every public name of the extension module,
and every public member of its classes, has a stub entry, and the stub names nothing that is gone."""
import ast
import pathlib

import tilewise
from tilewise import _core

_STUB = pathlib.Path(tilewise.__file__).with_name("_core.pyi")
_DUNDERS_STUBBED = {"__init__", "__str__", "__repr__", "__len__", "__getitem__", "__iter__", "__call__"}


def _stub_entries():
    tree = ast.parse(_STUB.read_text())
    entries = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for n in node.body:
                if isinstance(n, ast.FunctionDef):
                    members.add(n.name)
                elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                    members.add(n.target.id)
            entries[node.name] = members
        elif isinstance(node, ast.FunctionDef):
            entries[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            entries[node.target.id] = None
    return entries


def test_every_public_name_of_core_has_a_stub_and_no_stub_is_stale():
    entries = _stub_entries()
    public = {n for n in dir(_core) if not n.startswith("_")}
    assert sorted(public - set(entries)) == [], "public names of _core missing from _core.pyi"
    assert sorted(set(entries) - public) == [], "_core.pyi names that _core no longer has"


def test_every_class_member_has_a_stub():
    problems = {}
    for name, members in _stub_entries().items():
        obj = getattr(_core, name, None)
        if members is None or not isinstance(obj, type) or issubclass(obj, BaseException):
            continue  # exceptions: their stubbed attributes are set per instance
        real = {n for n in dir(obj) if not n.startswith("_")}
        missing, stale = real - members, members - real - _DUNDERS_STUBBED
        if missing or stale:
            problems[name] = {"missing": sorted(missing), "stale": sorted(stale)}
    assert not problems, problems
