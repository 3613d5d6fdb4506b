"""The package's structure: modules import each other in one direction only."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "python" / "strata"


def imports() -> dict[str, set[str]]:
    """Each module's imports of sibling modules at run time (TYPE_CHECKING blocks left out)."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    graph = {}
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
            for n in ast.walk(node)
        }
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and id(node) not in typing_only:
                found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        graph[path.stem] = found & modules
    return graph


def test_no_import_cycles():
    graph = imports()
    state: dict[str, int] = {}

    def visit(module, path):
        state[module] = 1
        for dep in sorted(graph[module]):
            assert state.get(dep) != 1, "import cycle: " + " -> ".join([*path, module, dep])
            if dep not in state:
                visit(dep, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state and module != "__init__":
            visit(module, [])


def test_writing_arrays_does_not_need_the_netcdf_importer():
    graph = imports()
    seen, todo = set(), ["writer"]
    while todo:
        module = todo.pop()
        seen.add(module)
        todo += [d for d in graph[module] if d not in seen]
    assert "importer" not in seen and "analyze" not in seen, seen


def test_import_strata_and_the_command_line_do_not_load_numpy():
    """The command line starts without NumPy's import (about 0.15 s); commands that need it
    load it (bench/bench_startup.py)."""
    import subprocess
    import sys

    code = (
        "import sys, strata, strata.cli\n"
        "assert 'numpy' not in sys.modules, sorted(m for m in sys.modules if m.startswith(('numpy', 'strata')))\n"
        "import strata.analyze, strata.sql\n"
        "assert callable(strata.analyze) and callable(strata.sql), (strata.analyze, strata.sql)\n"
        "assert strata.open.__module__ == 'strata.dataset' and 'Writer' in dir(strata)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
