"""The import graph follows one order, so a reader can take the code floor by floor:
core -> config -> distenv -> models -> metrics -> parallel -> workloads -> predict -> launch -> tracking
-> report -> orchestration. A module imports only from its own floor or below (lazy imports inside functions
count too), and no modules import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "parbench"
FLOORS = (
    ("__init__", "bytecode", "registry", "paths", "dtypes", "fmt"),  # core: what every layer may use
    ("config",),
    ("distenv",),  # this rank's identity, shared by metrics, parallel and workloads
    ("models",),
    ("metrics",),
    ("parallel",),
    ("workloads",),
    ("predict",),  # the performance model: reads config, model shapes, strategy and workload specs
    ("launch",),
    ("tracking",),
    ("report",),
    ("prepare", "orchestrator", "sweep", "sweep_check", "sync", "worker", "planner", "calibration_runs", "calibration_fit", "calibration_summary", "calibrate", "__main__"),
)
FLOOR = {part: level for level, parts in enumerate(FLOORS) for part in parts}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    """parbench.workloads.train -> workloads; parbench -> __init__."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """parbench modules the file imports (with `from x import y`, y when it is a module)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("parbench")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("parbench"):
            folder = SRC.parent / node.module.replace(".", "/")
            submodules = {f"{node.module}.{a.name}" for a in node.names
                          if (folder / f"{a.name}.py").exists() or (folder / a.name / "__init__.py").exists()}
            found |= submodules or {node.module}
    return found


def source_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_part_has_a_floor():
    parts = {part_of(module_name(p)) for p in source_files()}
    assert parts <= set(FLOOR), f"give these a floor in FLOORS: {sorted(parts - set(FLOOR))}"


def test_imports_never_run_up_a_floor():
    upward = []
    for path in source_files():
        importer = module_name(path)
        for imported in imports(path):
            if FLOOR[part_of(imported)] > FLOOR[part_of(importer)]:
                upward.append(f"{importer} -> {imported}")
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_no_import_circles():
    graph = {module_name(p): {m for m in imports(p, top_level_only=True)} for p in source_files()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = 1
        for nxt in sorted(graph.get(module, ())):
            if state.get(nxt) == 1:
                return path + [module, nxt]
            if nxt in graph and not state.get(nxt):
                found = visit(nxt, path + [module])
                if found:
                    return found
        state[module] = 2
        return None

    for module in sorted(graph):
        if not state.get(module):
            cycle = visit(module, [])
            assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_orchestrator_validates_without_torch_or_mlflow():
    """A bad config is refused in about a second: nothing the orchestrator imports before
    validating loads torch, mlflow, matplotlib or pandas."""
    import subprocess
    import sys

    code = ("import sys, parbench.orchestrator, parbench.sweep; "
            "print(sorted(m for m in ('torch', 'mlflow', 'matplotlib', 'pandas') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_every_workload_is_planned_without_torch():
    """The orchestrator resolves, validates and plans every point of a sweep before the first launch
    (sweep_check.py): loading torch there cost 2-6 s before a single rank started."""
    import subprocess
    import sys

    points = [[], ["workload=inference"], ["workload=matmul"],
              ["workload=collectives"], ["workload=membw"], ["workload=elementwise"], ["workload=tp_linear"],
              ["workload=p2p", "hardware=h100_sxm", "hardware.gpus_per_node=2", "dry_run=true"],
              ["workload=flops_check"], ["model=llama2_7b", "hardware=h100_sxm", "hardware.gpus_per_node=8", "parallel=tp", "dry_run=true"]]
    code = ("import sys\n"
            "from hydra import compose, initialize_config_dir\n"
            "from parbench.config.store import register_schema\n"
            "from parbench.paths import CONF_DIR\n"
            "from parbench.prepare import prepare\n"
            "register_schema()\n"
            "with initialize_config_dir(config_dir=str(CONF_DIR), version_base='1.3'):\n"
            f"    for overrides in {points!r}:\n"
            "        cfg, dims, plan = prepare(compose('config', overrides=overrides), [])\n"
            "        assert plan, overrides\n"
            "print(sorted(m for m in ('torch', 'mlflow', 'matplotlib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
