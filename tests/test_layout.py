"""The direction of imports between the package's subpackages (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).parent.parent / "exporter"

# Each subpackage and the subpackages it may import; the top-level modules (__init__, __main__) are free.
ALLOWED: dict[str, set[str]] = {
    "common": set(),
    "redis": {"common"},
    "aws": {"common"},
    "baselines": {"common", "redis"},
    "alerts": {"common", "baselines", "aws"},
    "capacity": {"common", "baselines", "aws"},
    "config": {"common", "redis", "aws", "baselines"},
    "service": {"common", "redis", "aws", "baselines", "config"},
    "cli": {"common", "redis", "aws", "baselines", "alerts", "capacity", "config", "service"},
}


def _imported_subpackages(module: tuple[str, ...], source: str) -> set[str]:
    """The exporter subpackages that module (e.g. ("exporter", "redis", "node")) imports, relative and lazy imports included."""
    package = module[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = [".".join((*base, node.module)) if node.module else ".".join(base)]
                if not node.module:
                    names = [".".join((*base, alias.name)) for alias in node.names]
            else:
                names = [node.module or ""]
        for name in names:
            parts = name.split(".")
            if parts[0] == "exporter" and len(parts) > 1 and parts[1] in ALLOWED:
                found.add(parts[1])
    return found


def test_every_subpackage_is_declared() -> None:
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert subpackages == set(ALLOWED)
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose == {"__init__.py", "__main__.py"}, "modules belong in a subpackage"


def test_imports_follow_the_layers() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        owner = path.relative_to(PACKAGE).parts[0]
        if owner not in ALLOWED:
            continue
        module = path.relative_to(PACKAGE.parent).with_suffix("").parts
        for imported in _imported_subpackages(module, path.read_text(encoding="utf-8")) - {owner} - ALLOWED[owner]:
            wrong.append(f"{path.relative_to(PACKAGE.parent)} imports exporter.{imported}")
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_relative_and_lazy_imports() -> None:
    # A module that breaks the rules in each form must be caught, so the test above can fail.
    source = "from .info import x\ndef f():\n    from ..service import server\n    import exporter.cli.main\n    from .. import aws\n"
    assert _imported_subpackages(("exporter", "redis", "probe"), source) == {"redis", "service", "cli", "aws"}


def test_architecture_map_names_every_subpackage() -> None:
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for name in ALLOWED:
        assert f"`exporter/{name}/`" in text


def _module_imports(module: tuple[str, ...], source: str, known: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The package's modules that ``module`` imports when it runs: relative, absolute and lazy imports (inside a
    function) included, those under ``if TYPE_CHECKING:`` left out (they never run)."""
    package = module[:-1]  # for a package's __init__ as for a module: relative imports start from its folder
    checking: set[int] = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            checking.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    found: set[tuple[str, ...]] = set()
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        candidates: list[tuple[str, ...]] = []
        if isinstance(node, ast.Import):
            candidates = [tuple(alias.name.split(".")) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            origin = (*base, *(node.module.split(".") if node.module else ()))
            candidates = [(*origin, alias.name) for alias in node.names] + [origin]
        for name in candidates:
            if name in known:
                found.add(name)
            elif (*name, "__init__") in known and name != package:
                found.add((*name, "__init__"))
    return found - {module}


def _import_graph() -> dict[tuple[str, ...], set[tuple[str, ...]]]:
    paths = {path.relative_to(PACKAGE.parent).with_suffix("").parts: path for path in PACKAGE.rglob("*.py")}
    known = set(paths)
    return {module: _module_imports(module, path.read_text(encoding="utf-8"), known) for module, path in paths.items()}


def _cycles(graph: dict[tuple[str, ...], set[tuple[str, ...]]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each as sorted dotted names."""
    index: dict[tuple[str, ...], int] = {}
    low: dict[tuple[str, ...], int] = {}
    stack: list[tuple[str, ...]] = []
    on_stack: set[tuple[str, ...]] = set()
    groups: list[list[str]] = []

    def visit(node: tuple[str, ...]) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(".".join(member))
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_import_cycle_between_modules() -> None:
    cycles = _cycles(_import_graph())
    assert not cycles, "modules that import each other (lazy imports included): " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_sees_a_lazy_cycle() -> None:
    known = {("exporter", "baselines", "table"), ("exporter", "baselines", "latency")}
    table = _module_imports(("exporter", "baselines", "table"), "def f():\n    from .latency import parse\n", known)
    latency = _module_imports(("exporter", "baselines", "latency"), "from .table import BaselineError\n", known)
    typed = _module_imports(("exporter", "baselines", "latency"), "if TYPE_CHECKING:\n    from .table import X\n", known)
    graph = {("exporter", "baselines", "table"): table, ("exporter", "baselines", "latency"): latency}
    assert _cycles(graph) == [["exporter.baselines.latency", "exporter.baselines.table"]]
    assert typed == set()


def _sources() -> dict[str, str]:
    return {str(path.relative_to(PACKAGE.parent)): path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}


def test_complexity_limits_are_on() -> None:
    """Functions are kept small by ruff's complexity rules (C901, PLR0912, PLR0915), not modules by a line count."""
    import tomllib

    lint = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert {"C90", "PL"} <= set(lint["select"])
    assert not {"C901", "PLR0912", "PLR0915"} & set(lint["ignore"])
    assert lint["mccabe"]["max-complexity"] <= 12


def test_each_aws_concern_has_one_home() -> None:
    """GetMetricData is called from aws/cloudwatch.py alone, pagination tokens are followed in aws/api.py alone, and the
    CloudWatch namespace is written once."""
    sources = _sources()
    calls = sorted(path for path, text in sources.items() if '"get_metric_data"' in text and path != "exporter/aws/api.py")
    assert calls == ["exporter/aws/cloudwatch.py"]
    assert sorted(path for path, text in sources.items() if "NextToken" in text) == ["exporter/aws/api.py"]
    assert sum(text.count('"AWS/ElastiCache"') for text in sources.values()) == 1
    templates = PACKAGE.parent / "templates"
    assert not [path.name for path in templates.iterdir() if "AWS/ElastiCache" in path.read_text(encoding="utf-8")]


def test_every_scrape_command_is_one_entry_of_the_table() -> None:
    """A Redis command is sent by the scrape only through pipeline.SCRAPE_COMMANDS: node.py builds no command of its own
    apart from the connection's set-up (AUTH, SELECT, COMMAND INFO, CLIENT SETNAME, READONLY) and the heartbeat writer."""
    from exporter.redis.pipeline import ASKED, SCRAPE_COMMANDS

    purposes = [command.purpose for command in SCRAPE_COMMANDS]
    assert len(purposes) == len(set(purposes))
    assert ASKED[0] == "client"
    assert len(ASKED) == len(set(ASKED))
    node = (PACKAGE / "redis" / "node.py").read_text(encoding="utf-8")
    for word in ("SLOWLOG", "LATENCY", "CONFIG", "MGET", "TYPE"):
        assert f'"{word}"' not in node, f"{word} belongs in its module's ScrapeCommand"
