"""The layout of effsearch's modules: ``config/`` is the ground floor (it imports nothing
above it), no import cycle of any kind (function-level imports and imports under ``if
TYPE_CHECKING:`` count: a deferred import is still a dependency, and a type a module annotates
with belongs below it), every package says what it is and what it exports, and no module
reaches into another's private (``_name``) names."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "effsearch"
ABOVE_CONFIG = (
    "effsearch.trainer",
    "effsearch.spaces",
    "effsearch.search",
    "effsearch.objectives",
    "effsearch.cli",
    "effsearch.data_cli",
    "effsearch.api",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str) -> str | None:
    """The effsearch module ``name`` is, or lives in (``a.b.NAME`` -> ``a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(mod: str):
    """(imported module, names taken from it, line) for every import in ``mod``, at any depth."""
    path = MODULES[mod]
    tree = ast.parse(path.read_text(), str(path))
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("effsearch"):
                    yield resolve(alias.name), (), node.lineno, {alias.asname or alias.name: resolve(alias.name)}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if not base.startswith("effsearch"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:  # `from effsearch.config import rules`: the submodule
                    yield sub, (), node.lineno, {alias.asname or alias.name: sub}
                else:
                    yield resolve(base), (alias.name,), node.lineno, {}


# Cycles listed here are known and pending; a new cycle fails, and so does one listed here
# that is gone (then delete it from this list).
PENDING: set[frozenset] = set()

# Private names another module still takes (none left).
PENDING_PRIVATE: set[tuple[str, str]] = set()


def graph() -> dict[str, set[str]]:
    return {mod: {target for target, _, _, _ in imports(mod) if target and target != mod} for mod in MODULES}


def test_no_import_cycles():
    g = graph()
    cycles, state, stack = [], {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(g[m]):
            if state.get(n) == "open":
                cycles.append(stack[stack.index(n) :] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m)
    found = {frozenset(c) for c in cycles}
    new = [c for c in cycles if frozenset(c) not in PENDING]
    assert not new, "import cycles:\n" + "\n".join(" -> ".join(c) for c in new)
    assert PENDING <= found, f"cycles gone (delete them from PENDING): {PENDING - found}"


def test_config_stands_on_nothing_above_it():
    bad = [
        f"{mod}:{line} imports {target}"
        for mod in MODULES
        if mod.startswith("effsearch.config")
        for target, _, line, _ in imports(mod)
        if target and target.startswith(ABOVE_CONFIG)
    ]
    assert not bad, bad


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_no_module_uses_another_modules_private_names(mod):
    bad = []
    bound = {}
    for target, names, line, aliases in imports(mod):
        bound.update(aliases)
        for name in names:
            if (
                name.startswith("_")
                and not name.startswith("__")
                and target != mod
                and (mod, f"{target}.{name}") not in PENDING_PRIVATE
            ):
                bad.append(f"line {line}: from {target} import {name}")
    tree = ast.parse(MODULES[mod].read_text())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and bound[node.value.id] != mod
        ):
            bad.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    assert not bad, bad


def test_only_storage_imports_from_optunas_private_modules():
    """Optuna's private modules change without notice: one module (search/store/storage.py) holds
    every use of them, so an Optuna upgrade is checked in one place."""
    bad = []
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                private = name.startswith("optuna") and any(p.startswith("_") for p in name.split("."))
                if private and mod != "effsearch.search.store.storage":
                    bad.append(f"{mod}:{node.lineno} imports {name}")
    assert not bad, bad


# What decides (what to prune, when to stop, which trials count, what to queue) asks
# search/store/queries.py; search/results/report.py only renders, and nothing that decides imports it.
DECIDERS = (
    "effsearch.search.store.queries",
    "effsearch.search.pruners.base",
    "effsearch.search.pruners.moasha",
    "effsearch.search.pruners.slowstop",
    "effsearch.search.pruners",
    "effsearch.search.run.budget",
    "effsearch.search.run.workers",
    "effsearch.search.run.warmstart",
    "effsearch.search.study.phases",
    "effsearch.search.results.cost",
    "effsearch.search.results.anytime",
)


def test_what_decides_imports_no_rendering():
    bad = [
        f"{mod}:{line} imports {target}"
        for mod in DECIDERS
        for target, _, line, _ in imports(mod)
        if target in ("effsearch.search.results.report", "effsearch.spaces.space")
    ]
    assert not bad, bad


# A function a reader can hold: at most 60 lines (as formatted), apart from the declarative
# tables, which read as data (one row per option or per flag). Modules are sized by their job:
# the sub-packages, not a line count, decide where code goes.
MAX_FUNCTION_LINES = 60
TABLES = {("effsearch.cli", "build_parser"), ("effsearch.spaces.default", "catalogue")}


def long_functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_no_function_in_the_package_is_over_60_lines():
    long = [
        f"{mod}.{name}: {n} lines"
        for mod, path in MODULES.items()
        for name, n in long_functions(path)
        if (mod, name) not in TABLES
    ]
    assert not long, f"extract named steps (at most {MAX_FUNCTION_LINES} lines): {long}"


def test_the_exempt_tables_exist():
    # An exemption whose function moved or was renamed would go stale silently: it must name a function.
    names = {
        (mod, node.name)
        for mod, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
    }
    assert TABLES <= names, TABLES - names


PACKAGES = sorted(mod for mod, path in MODULES.items() if path.name == "__init__.py")


@pytest.mark.parametrize("mod", PACKAGES)
def test_every_package_says_what_it_is_and_exports(mod):
    tree = ast.parse(MODULES[mod].read_text())
    assert ast.get_docstring(tree), f"{mod}: its __init__ needs a docstring saying what the package is"
    names = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
    ]
    assert names, f"{mod}: its __init__ needs __all__ (the names it exports)"
    exported = ast.literal_eval(names[0].value)
    here = MODULES[mod].parent
    defined = {
        n.id if isinstance(n, ast.Name) else getattr(n, "name", None) or getattr(n, "asname", None)
        for node in tree.body
        for n in (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else [node]
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
            else [a for a in node.names]
            if isinstance(node, (ast.Import, ast.ImportFrom))
            else []
        )
    }
    defined |= {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
    missing = [
        name
        for name in exported
        if name not in defined and not (here / f"{name}.py").exists() and not (here / name).is_dir()
    ]
    assert not missing, f"{mod}.__all__ names what it neither defines, imports nor holds: {missing}"


# The trial record's keys are its stored format: each is a named constant in search/store/attrs.py,
# so a reader and a writer cannot drift apart by a typo, and renaming one is a change in one place.
SETTERS = {"set_user_attr": 0, "set_trial_user_attr": 1, "set_study_user_attr": 1}


def _bare(node: ast.AST | None) -> bool:
    """A string literal or an f-string: a key spelled in place, not named."""
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def bare_attribute_keys(tree: ast.AST) -> list[int]:
    """Lines passing a bare string key to set_user_attr / user_attrs.get / user_attrs[...] (and
    ``in``, ``user_attrs=`` mappings), through a name bound to some ``X.user_attrs`` too."""
    aliases = {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "user_attrs"
        for t in node.targets
        if isinstance(t, ast.Name)
    }

    def attrs(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "user_attrs") or (
            isinstance(node, ast.Name) and node.id in aliases
        )

    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            at = SETTERS.get(node.func.attr)
            if at is not None and len(node.args) > at and _bare(node.args[at]):
                bad.append(node.lineno)
            if node.func.attr in ("get", "pop") and attrs(node.func.value) and node.args and _bare(node.args[0]):
                bad.append(node.lineno)
            for kw in node.keywords:
                if kw.arg == "user_attrs" and isinstance(kw.value, ast.Dict) and any(map(_bare, kw.value.keys)):
                    bad.append(node.lineno)
        elif isinstance(node, ast.Subscript) and attrs(node.value) and _bare(node.slice):
            bad.append(node.lineno)
        elif isinstance(node, ast.Compare) and _bare(node.left) and attrs(node.comparators[0]):
            bad.append(node.lineno)
    return bad


def test_no_module_names_a_trial_attribute_by_a_bare_string():
    bad = [
        f"{mod}:{line}"
        for mod, path in MODULES.items()
        for line in bare_attribute_keys(ast.parse(path.read_text(), str(path)))
    ]
    assert not bad, f"name the key in effsearch/search/store/attrs.py: {bad}"


def test_the_bare_key_check_sees_each_form():
    seen = bare_attribute_keys(
        ast.parse(
            "t.set_user_attr('reason', 1)\n"
            "s._storage.set_trial_user_attr(i, 'status', 2)\n"
            "t.user_attrs.get('seed_trials')\n"
            "t.user_attrs[f'rung_{k}']\n"
            "'baseline' in t.user_attrs\n"
            "study.enqueue_trial({}, user_attrs={'tune_trial': 1})\n"
            "a = t.user_attrs\n"
            "a.get('reason')\n"
            "t.set_user_attr(REASON_KEY, 1)\n"
            "t.user_attrs.get(rung_key(k))\n"
        )
    )
    assert seen == [1, 2, 3, 4, 5, 6, 8], seen


# Optuna's private attributes (the storage behind a study, a trial's id) change without notice:
# storage.py is the one module that reads them, as it is the one that imports Optuna's private modules.
OPTUNA_PRIVATE_ATTRIBUTES = {"_storage", "_trial_id", "_study_id"}


def private_optuna_attributes(tree: ast.AST) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in OPTUNA_PRIVATE_ATTRIBUTES
    ]


def test_only_storage_touches_optunas_private_attributes():
    bad = [
        f"{mod}:{line}"
        for mod, path in MODULES.items()
        if mod != "effsearch.search.store.storage"
        for line in private_optuna_attributes(ast.parse(path.read_text()))
    ]
    assert not bad, bad
    assert private_optuna_attributes(ast.parse("study._storage.get_trial(t._trial_id)")) == [1, 1]


def defining(name: str, method_of: str | None = None) -> list[str]:
    """The modules defining function ``name`` (top level), or a method ``name`` whose second
    argument is ``method_of``."""
    found = []
    for mod, path in MODULES.items():
        tree = ast.parse(path.read_text())
        nodes = tree.body if method_of is None else list(ast.walk(tree))
        for node in nodes:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                args = [a.arg for a in node.args.args]
                if method_of is None or args[1:2] == [method_of]:
                    found.append(mod)
    return sorted(set(found))


def calling(suffixes: tuple[str, ...]) -> list[str]:
    """The modules calling a name (or an attribute) that ends in one of ``suffixes``."""
    return sorted(
        {
            mod
            for mod, path in MODULES.items()
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call)
            and str(getattr(node.func, "id", None) or getattr(node.func, "attr", "")).endswith(suffixes)
        }
    )


def test_one_speedup_one_pruning_package_one_storage_opener():
    # A trial's speed-up is one function of two times; whatever stops a trial early (a study
    # pruner's on_eval) is in search/pruners/; a storage object is made in one place.
    assert defining("speedup") == ["effsearch.trainer.result"]
    pruners = defining("on_eval", method_of="trial")
    assert pruners and all(m.startswith("effsearch.search.pruners") for m in pruners), pruners
    assert calling(("RDBStorage", "JournalStorage")) == ["effsearch.search.store.storage"]
