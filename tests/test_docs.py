"""The docs cannot rot: every `python -m parbench ...` command in README.md and docs/*.md is composed,
type-checked and planned in-process (what `--cfg job` and `dry_run=true` do, without a subprocess per
line), every `python -m parbench.<module>` names a runnable module, every relative link points to a
file (and heading) that exists, and the README stays a short manual that links every page.
docs/results/ is left out: it records what ran on a given day."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from parbench.config import ConfigError, resolve
from parbench.config.hardware import GpuInfo
from parbench.config.store import register_schema
from parbench.prepare import make_plan, validate
from parbench.paths import CONF_DIR
from parbench.workloads.registry import typed_config

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]
README_MAX_LINES = 300

# A GPU line that cannot be planned on this CPU machine is planned for a node of 8 H100s instead,
# as `hardware=auto` would find it there.
GPU_NODE = [GpuInfo(name="NVIDIA H100 80GB HBM3", memory_mib=81559)] * 8
# Overrides that need an optional extra the dev install leaves out: where it is missing, the line
# is composed and type-checked, and its plan (which refuses to launch without the extra) is not.
OPTIONAL_EXTRAS = {"workload.engine=vllm": "vllm"}
SHELL_SEPARATORS = {"&&", "||", ";", "|", "&"}
FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class DocCommand:
    page: str
    line: int
    module: str  # parbench, or parbench.<module>
    args: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"

    def text(self) -> str:
        return " ".join(("python -m", self.module, *self.args))


def code_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, logical line) of the code in a page: fenced blocks and 4-space indented lines,
    with backslash continuations joined onto the first line."""
    in_fence, pending, start = False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not (in_fence or line.startswith("    ") or pending):
            continue
        start = start if pending else number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def shell_commands(line: str) -> Iterator[list[str]]:
    """The simple commands of a shell line (split at && ; |), comments and VAR=value prefixes removed."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # not shell (an unbalanced quote in a log excerpt)
        return
    command: list[str] = []
    for token in [*tokens, ";"]:
        if token in SHELL_SEPARATORS:
            while command and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", command[0]):
                command.pop(0)
            if command:
                yield command
            command = []
        else:
            command.append(token)


def page_commands(page: Path) -> list[DocCommand]:
    found = []
    for number, line in code_lines(page.read_text()):
        for cmd in shell_commands(line):
            if len(cmd) >= 3 and cmd[0] in ("python", "python3") and cmd[1] == "-m" and \
                    (cmd[2] == "parbench" or cmd[2].startswith("parbench.")):
                found.append(DocCommand(str(page.relative_to(REPO)), number, cmd[2], tuple(cmd[3:])))
    return found


COMMANDS = [c for page in PAGES for c in page_commands(page)]
CLI_COMMANDS = [c for c in COMMANDS if c.module == "parbench"]
MODULE_COMMANDS = [c for c in COMMANDS if c.module != "parbench"]


def parse_cli(command: DocCommand) -> tuple[bool, list[str]]:
    """(multirun, overrides) of a `python -m parbench` line; Hydra's flags other than -m and --cfg
    are not used in the docs, so they are refused here."""
    multirun, overrides, args = False, [], list(command.args)
    while args:
        arg = args.pop(0)
        if arg in ("-m", "--multirun"):
            multirun = True
        elif arg in ("--cfg", "-c"):
            args.pop(0)
        elif arg.startswith("-"):
            raise AssertionError(f"{command}: `{arg}` is not a flag this test knows: {command.text()}")
        else:
            overrides.append(arg)
    return multirun, overrides


def sweep_points(overrides: list[str], multirun: bool) -> list[list[str]]:
    """Override lists that together use every value of every sweep at least once (not the product)."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    if not multirun:
        return [overrides]  # a comma list without -m fails in compose, as it does on the command line
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
               else [o.input_line] for o in parsed]
    return [[values[i % len(values)] for values in choices] for i in range(max(map(len, choices), default=1))]


def compose_config(overrides: list[str]) -> DictConfig:
    """What `python -m parbench <overrides> --cfg job` composes (Hydra's own keys checked too)."""
    register_schema()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


def plan(node: DictConfig, gpus: list[GpuInfo]) -> dict:
    """What `dry_run=true` prints: resolve, validate for planning, plan (as orchestrator.run_job)."""
    cfg = resolve.resolve(typed_config(node), gpus)
    return make_plan(cfg, validate(cfg, None))


def plan_here_or_on_gpus(node: DictConfig) -> str | None:
    """None when the config plans on this CPU machine or on a GPU node; else both refusals."""
    refusals = []
    for where, gpus in (("on CPU", []), ("on 8 H100s", GPU_NODE)):
        try:
            plan(node, gpus)
            return None
        except ConfigError as e:
            refusals.append(f"{where}: {e}")
    return "; ".join(refusals)


def missing_extra(overrides: list[str]) -> str | None:
    for override, package in OPTIONAL_EXTRAS.items():
        if override in overrides and importlib.util.find_spec(package) is None:
            return package
    return None


def test_the_docs_hold_the_commands_this_test_checks():
    readme = [c for c in CLI_COMMANDS if c.page == "README.md"]
    assert len(readme) >= 8 and len(CLI_COMMANDS) >= 30, (
        f"found {len(readme)} README and {len(CLI_COMMANDS)} docs commands: is the collector broken?")
    assert any(c.args == () for c in readme), "the set-up line's `python -m parbench` was not collected"


@pytest.mark.parametrize("command", CLI_COMMANDS, ids=str)
def test_documented_command_composes_and_plans(command: DocCommand):
    multirun, overrides = parse_cli(command)
    for point in sweep_points(overrides, multirun):
        node = compose_config(point)
        resolve.to_typed(node)  # the schema and the workload's own fields, as the job checks them
        if missing_extra(point):
            continue
        refused = plan_here_or_on_gpus(node)
        assert refused is None, f"{command}: `{command.text()}` at {point} is refused {refused}"


@pytest.mark.parametrize("command", MODULE_COMMANDS, ids=str)
def test_documented_module_runs_with_python_m(command: DocCommand):
    spec = importlib.util.find_spec(command.module)
    assert spec is not None, f"{command}: no module {command.module} ({command.text()})"
    if spec.submodule_search_locations is not None:  # a package runs through its __main__
        assert importlib.util.find_spec(command.module + ".__main__"), f"{command}: {command.module} has no __main__"


def test_in_process_plan_is_what_the_cli_prints(tmp_path: Path):
    """The checks above stand for the CLI: its dry-run plan for the README's line is the same."""
    command = next(c for c in CLI_COMMANDS if c.page == "README.md" and "dry_run=true" in c.args)
    _, overrides = parse_cli(command)
    proc = subprocess.run([sys.executable, "-m", "parbench", *overrides, f"hydra.run.dir={tmp_path / 'run'}",
                           f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert printed == json.loads(json.dumps(plan(compose_config(overrides), [])))


# ---- links ----------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """The page without fenced code and inline code spans, where brackets are not links."""
    kept, in_fence = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2 for repeats."""
    anchors: set[str] = set()
    for line in prose(page.read_text().replace("`", "")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
            anchor, n = base, 0
            while anchor in anchors:
                n += 1
                anchor = f"{base}-{n}"
            anchors.add(anchor)
    return anchors


def relative_links(page: Path) -> Iterator[tuple[str, Path, str]]:
    """(link as written, target path, anchor) of every link that is not a URL."""
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, anchor = target.partition("#")
        yield target, (page.parent / path).resolve() if path else page, anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_point_to_existing_files_and_headings(page: Path):
    broken = []
    for written, target, anchor in relative_links(page):
        if not target.exists():
            broken.append(f"{written}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in heading_anchors(target):
            broken.append(f"{written}: no heading with anchor #{anchor} in {target.name}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_readme_is_a_manual_that_links_every_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move topic detail to a page in docs/")
    linked = {target for _, target, _ in relative_links(README)}
    unlinked = [str(p.relative_to(REPO)) for p in DOCS if p.resolve() not in linked]
    assert not unlinked, f"README.md does not link {unlinked}: add them to 'Where to look next'"
