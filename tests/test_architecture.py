"""The layers' rules (issue 33; agents/__init__.py says what each layer is for), checked
on the source itself: no test here needs a database or Django's settings.

import-linter (``.importlinter``, run by ``make test``) checks the import graph; the tests
below hold even where it is not installed: the brain imports in a fresh interpreter with no
Django, the project's own modules import no circle, the lower layers import nothing above
them (lazily neither), and no module grows past 600 lines unless it says why it stays whole.
"""
from __future__ import annotations

import ast
import configparser
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agents", "access", "devices", "frontend", "kairos_web")
MAX_LINES = 600
# What each lower layer must never import, lazily or not (the same as .importlinter's).
FORBIDDEN = {
    "agents.brain": ("django", "celery", "channels", "agents.runtime", "agents.evaluation",
                     "frontend", "kairos_web", "access"),
    "devices": ("agents", "frontend", "kairos_web"),
    "access": ("agents", "frontend", "kairos_web"),
}


def python_files(*tops: str) -> list[Path]:
    """Every .py file under the given top-level folders, migrations left out."""
    return sorted(path for top in tops for path in (ROOT / top).rglob("*.py")
                  if "migrations" not in path.relative_to(ROOT).parts)


def module_name(path: Path) -> str:
    """agents/brain/loop.py -> agents.brain.loop; a package's __init__ is the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every import in the file: module level, inside
    functions and under ``if TYPE_CHECKING``. ``from X import Y`` gives X.Y, which
    project_target reads as X when Y is not a module; relative imports are made absolute."""
    module, is_package = module_name(path), path.name == "__init__.py"
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join(package + ([node.module] if node.module else []))
            names += [(node.lineno, f"{base}.{alias.name}" if alias.name != "*" else base)
                      for alias in node.names]
    return names


def project_target(name: str, modules: set[str]) -> str | None:
    """The project module an imported name means: the name itself, else its longest
    prefix that is a module (``from pkg import function`` -> pkg); None outside the
    project. ``from pkg.sub import x`` names pkg.sub only: the implicit import of pkg's
    __init__ that Python does on the way is not counted as an edge."""
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts) or None


def import_graph() -> dict[str, set[str]]:
    files = python_files(*PACKAGES)
    modules = {module_name(path) for path in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        source = module_name(path)
        targets = {project_target(name, modules) for _, name in imported_names(path)}
        graph[source] = targets - {None, source}
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (a deep import chain needs no recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    work: list = []
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(sorted(graph.get(node, ())))))

    for start in sorted(graph):
        if start not in index:
            visit(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: set[str] = set()
                    while node not in component:
                        component.add(stack.pop())
                    on_stack.difference_update(component)
                    components.append(sorted(component))
            elif child not in index:
                visit(child)
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself (breadth first)."""
    members, start = set(component), component[0]
    paths = {child: [start, child] for child in graph[start] if child in members}
    queue = list(paths)
    while queue and start not in paths:
        node = queue.pop(0)
        for child in sorted(graph[node] & members):
            if child not in paths:
                paths[child] = paths[node] + [child]
                queue.append(child)
    return paths.get(start, component)


BRAIN_IMPORT_SCRIPT = """
import importlib, json, sys, traceback
names, failures, first_loaded = json.loads(sys.argv[1]), {}, {}
for name in names:
    before = {m.split(".")[0] for m in sys.modules}
    try:
        importlib.import_module(name)
    except BaseException as error:
        failures[name] = "".join(traceback.format_exception_only(error)).strip()
    for package in ("django", "celery", "channels"):
        if package in sys.modules and package not in before:
            first_loaded.setdefault(package, name)
print(json.dumps({"failures": failures, "first_loaded": first_loaded}))
"""


def test_every_brain_module_imports_without_django():
    names = [module_name(path) for path in python_files("agents/brain")]
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", BRAIN_IMPORT_SCRIPT, json.dumps(names)],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    problems = [f"{name} does not import: {error}" for name, error in result["failures"].items()]
    problems += [f"{package} is loaded (first while importing {name})"
                 for package, name in result["first_loaded"].items()]
    assert not problems, (f"of {len(names)} brain modules, in a fresh interpreter without "
                          "DJANGO_SETTINGS_MODULE:\n" + "\n".join(problems))


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    assert sorted(strongly_connected(graph)) == [["a", "b", "c"], ["d"], ["e"]]
    assert one_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_cycles_in_the_project():
    graph = import_graph()
    cycles = [one_cycle(graph, c) for c in strongly_connected(graph) if len(c) > 1]
    assert not cycles, "import cycles (functions and TYPE_CHECKING blocks counted):\n" + \
        "\n".join(" -> ".join(cycle) for cycle in cycles)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_lower_layers_import_nothing_above_them(layer):
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {name}"
             for path in python_files(layer.replace(".", "/"))
             for line, name in imported_names(path)
             if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer])]
    assert not wrong, f"{layer} must not import {', '.join(FORBIDDEN[layer])}:\n" + \
        "\n".join(sorted(set(wrong)))


def test_modules_stay_under_600_lines_unless_they_say_why():
    too_long = []
    for path in python_files(*PACKAGES, "tests"):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if lines > MAX_LINES and "stays whole" not in docstring.lower():
            too_long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not too_long, (f"over {MAX_LINES} lines, and no 'stays whole' (with the reason) "
                          "in the module docstring:\n" + "\n".join(too_long))


def test_import_linter_config_names_the_contracts():
    config = configparser.ConfigParser()
    assert config.read(ROOT / ".importlinter"), ".importlinter is missing"
    assert config["importlinter"]["root_packages"].split() == list(PACKAGES)
    contracts = {s.split(":")[-1]: config[s] for s in config.sections() if ":contract:" in s}
    assert set(contracts) == {"agents-layers", "brain-is-pure", "devices-below-agents",
                              "access-below-apps", "runtime-not-above",
                              "production-not-evaluation"}
    assert contracts["agents-layers"]["layers"].split() == ["evaluation", "runtime", "brain"]
    for contract, source in (("brain-is-pure", "agents.brain"),
                             ("devices-below-agents", "devices"), ("access-below-apps", "access")):
        assert contracts[contract]["source_modules"].split() == [source]
        assert set(contracts[contract]["forbidden_modules"].split()) == set(FORBIDDEN[source])
    for name, contract in contracts.items():  # indirect imports count too (the default)
        assert contract.get("allow_indirect_imports", "false").lower() == "false", name


def test_import_linter_contracts_hold():
    if importlib.util.find_spec("importlinter") is None:
        pytest.skip("import-linter is not installed (requirements-test.txt has it; CI runs it)")
    command = Path(sys.executable).with_name("lint-imports")
    command = str(command) if command.exists() else shutil.which("lint-imports")
    if command is None:
        pytest.skip("import-linter is installed but its lint-imports command is not on PATH")
    done = subprocess.run([command, "--no-cache"], check=False, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
