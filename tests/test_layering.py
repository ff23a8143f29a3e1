"""The layering the architecture promises (docs/architecture.md).

- The import graph of emulation/, controllers/ and topologies/ (every import, at module level or
  inside a function) has no cycle.
- The core never imports a scenario kind (emulation/kinds/ and the kinds' packages wan, rails,
  tenancy, training) nor the command line; a kind's package imports no other kind.
- controllers/ imports neither a kind nor the orchestrator (emulation/emulator/, runner, cli).
- No module imports another module's private (``_``) name.
- A public class or function name has one meaning: defined in one module, except the
  interface names below, which every module of a role defines in the same sense, and the Python
  API's verbs (emulation/api.py), always called as ``api.load``, ``api.run``.
- The two backends consume the same contract (emulation/schedule.py) and neither imports the
  other; planners and the flow backend never import Mininet, OS-Ken or the controllers.
"""

import ast
import collections
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("emulation", "controllers", "topologies")
KIND_PACKAGES = ("emulation.kinds", "emulation.collective", "emulation.wan", "emulation.rails", "emulation.tenancy",
                 "emulation.training")
#: The front doors: the command line and the Python API (emulation/api.py), above every kind.
COMMAND_LINE = ("emulation.cli", "emulation.__main__", "emulation.api")
ORCHESTRATOR = ("emulation.emulator", "emulation.collective.runner")
#: The Python API: a facade whose verbs are the commands' (load, run, read), each documented
#: there and in docs/api.md; its names are its own namespace (``api.load``), not another meaning.
FACADE = "emulation.api"
#: Names that several modules define in one sense (a role's interface).
INTERFACES = {
    "main": "a program's entry point (python -m ...)",
    "execute": "a backend's execution of one RunDescription (flowsim/run.py, emulator/execute.py)",
    "write": "a report module's files beside result.json",
    "print_summary": "a report module's summary tables",
    "print_packet": "a kind's report of its packet run",
    "write_packet": "a kind's files of its packet run beside result.json",
    "timeline_plot": "a kind's timeline figure",
}


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _graph() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """``(module -> modules it imports, [(module, from module, private name)])``."""
    mods = _modules()
    edges: dict[str, set[str]] = collections.defaultdict(set)
    private = []
    for m, path in mods.items():
        pkg = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    target = f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                    if target in mods and target != m:
                        edges[m].add(target)
                    if a.name.startswith("_") and not a.name.startswith("__") and base in mods and base != m:
                        private.append((m, base, a.name))
            elif isinstance(node, ast.Import):
                edges[m] |= {a.name for a in node.names if a.name in mods and a.name != m}
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in list(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_import_graph_has_no_cycle():
    edges, _ = _graph()
    assert sum(map(len, edges.values())) > 300  # the graph was read
    assert _cycles(edges) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check has teeth


def test_the_core_never_imports_a_kind_and_kinds_import_no_other_kind():
    edges, _ = _graph()
    core = [(m, t) for m, ts in edges.items() if not _under(m, KIND_PACKAGES + COMMAND_LINE)
            for t in ts if _under(t, KIND_PACKAGES + COMMAND_LINE)]
    assert core == []
    cross = [(m, t) for m, ts in edges.items() if _under(m, KIND_PACKAGES[1:])
             for t in ts if _under(t, KIND_PACKAGES) and t.split(".")[1] != m.split(".")[1]]
    assert cross == []
    assert any(_under(t, ("emulation.wan",)) for t in edges["emulation.kinds.wan"])  # kinds use their package


def test_controllers_import_neither_a_kind_nor_the_orchestrator():
    edges, _ = _graph()
    bad = [(m, t) for m, ts in edges.items() if _under(m, ("controllers",))
           for t in ts if _under(t, KIND_PACKAGES + COMMAND_LINE + ORCHESTRATOR)]
    assert bad == []
    assert any(_under(t, ("emulation.planners",)) for t in edges["controllers.wan_te"])  # they do use the core


def test_no_module_imports_another_modules_private_name():
    _, private = _graph()
    assert private == []


def test_a_public_name_has_one_meaning():
    defined = collections.defaultdict(list)
    for m, path in _modules().items():
        if m == FACADE:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                defined[node.name].append(m)
    twice = {n: ms for n, ms in defined.items() if len(ms) > 1 and n not in INTERFACES}
    assert twice == {}
    assert len(defined["main"]) > 3 and len(defined["write"]) > 3  # the interfaces are shared, as declared


def _loaded(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """Modules under ``prefixes`` that importing ``modules`` loads (in a fresh interpreter)."""
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + f"print('\\n'.join(sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') "
              f"for p in {prefixes!r}))))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return got.stdout.split()


@pytest.mark.parametrize("modules, forbidden", [
    (["emulation.flowsim", "emulation.flowsim.run", "emulation.flowsim.iteration", "emulation.planners",
      "emulation.planners.slotted", "emulation.planners.opus", "emulation.scenario", "emulation.schedule",
      "emulation.results", "topologies.rail_network", "emulation.flowsim.wan", "emulation.flowsim.rail_sweep",
      "emulation.flowsim.rack_sweep", "emulation.flowsim.job_manager", "emulation.planners.divergence",
      "emulation.planners.slicing", "emulation.planners.tenants", "emulation.te_intervals",
      "emulation.planners.spectra", "emulation.flowsim.parallel_ocs", "emulation.workloads.spectra",
      "emulation.planners.overlap"],
     ("emulation.emulator", "mininet", "os_ken", "controllers")),
    (["emulation.emulator.execute", "emulation.emulator.calibration", "emulation.torchjob.recovery",
      "emulation.emulator.tenants", "emulation.emulator.wan_replay", "emulation.emulator.wan_net",
      "emulation.emulator.dependency", "emulation.emulator.parallel_ocs"],
     ("emulation.flowsim", "emulation.scenario")),
])
def test_backends_and_planners_do_not_import_each_other(modules, forbidden):
    assert _loaded(modules, forbidden) == []


def test_the_rack_model_and_the_allocators_import_no_scenario_kind():
    """The multi-tenant rack model (topologies) and its slice allocators (planners) are core: the
    tenancy kind imports them, never the other way round."""
    assert _loaded(["topologies.torus_rack", "emulation.planners.allocators", "emulation.flowsim.tenants"],
                   ("emulation.tenancy", "emulation.wan", "emulation.rails", "emulation.training", "mininet",
                    "os_ken", "controllers")) == []


KINDS = ("emulation.collective", "emulation.wan", "emulation.rails", "emulation.tenancy", "emulation.training")


@pytest.mark.parametrize("modules, forbidden", [
    (["emulation.planners.te", "emulation.planners.tunnels"], KINDS + ("emulation.emulator", "controllers")),
    (["controllers.base", "controllers.wan_te"], KINDS + ("emulation.emulator",)),
])
def test_the_wan_te_solvers_and_its_controller_stand_on_the_core(modules, forbidden):
    """The TE solvers are planners (core); the WAN's TE controller imports neither a scenario
    kind nor the orchestrator."""
    assert _loaded(modules, forbidden) == []


def test_the_wan_kind_imports_no_controller_app():
    """The WAN kind and its packet backend start their controllers as processes; they import none
    of their modules."""
    import ast
    from pathlib import Path

    emulation = Path(__file__).resolve().parents[1] / "emulation"
    found = []
    paths = sorted((emulation / "wan").glob("*.py")) + sorted((emulation / "emulator").glob("wan_*.py"))
    assert len(paths) >= 5  # the kind's package and the packet backend's three WAN modules
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {n}" for n in names if n == "controllers" or n.startswith("controllers.")]
    assert found == []


def test_controllers_import_core_modules_but_no_scenario_kind_nor_the_orchestrator():
    assert "emulation.planners.opus" in _loaded(["controllers.opus"], ("emulation.planners",))
    assert _loaded(["controllers.opus", "controllers.api"], ("emulation.rails", "emulation.wan", "emulation.tenancy",
                                                             "emulation.training", "emulation.emulator")) == []


def test_the_topologies_package_needs_no_numpy():
    assert _loaded(["topologies", "topologies.builders"], ("numpy", "emulation.flowsim")) == []


def test_torch_lives_in_emulation_torchjob_which_is_core():
    """Only emulation/torchjob/ imports PyTorch (the in-host programs; the launcher and the
    benchmark driver beside them); importing any of its modules loads no scenario kind and not the
    command line."""
    mods = _modules()
    found = []
    for m, path in mods.items():
        if _under(m, ("emulation.torchjob",)):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{m}: {n}" for n in names if n == "torch" or n.startswith("torch.")]
    assert found == []
    torchjob = sorted(m for m in mods if _under(m, ("emulation.torchjob",)))
    assert {"emulation.torchjob.launch", "emulation.torchjob.perf", "emulation.torchjob.train"} <= set(torchjob)
    assert _loaded(torchjob, KIND_PACKAGES + COMMAND_LINE) == []


def test_the_layers_that_run_each_kind_load_no_kind():
    """Kinds declare, layers compute: the rail and rack sweeps, the WAN's section, flow run and
    packet replay, tenants on packets and the recoveries (each with its section and result) load
    no scenario kind and not the command line, so scripts and tests call them without a kind."""
    layers = ["emulation.flowsim.rail_sweep", "emulation.flowsim.rack_sweep", "emulation.te_intervals",
              "emulation.flowsim.wan", "emulation.wan_packet", "emulation.tenants_packet",
              "emulation.torchjob.recoveries"]
    assert _loaded(layers, KIND_PACKAGES + COMMAND_LINE) == []
    assert "emulation.flowsim.rail_sweep" in _loaded(layers, ("emulation.flowsim",))  # they were loaded


def test_a_topology_module_is_data():
    """topologies/ builds fabrics and describes them; it runs nothing: it imports only the
    fabric model, the data plane's names and where a sharded OCS's ports live (both pure
    mappings), and the section base (a rail's time model is the flow backend's,
    emulation/flowsim/rail_times.py)."""
    edges, _ = _graph()
    allowed = ("topologies", "emulation.fabric", "emulation.dataplane", "emulation.ocs_shards", "emulation.sections",
               "emulation.units")
    assert _loaded(["emulation.ocs_shards"], ("emulation.fabric", "numpy")) == []  # names and numbers only
    wrong = sorted((m, t) for m, ts in edges.items() if _under(m, ("topologies",)) for t in ts
                   if not _under(t, allowed))
    assert wrong == []


def test_nothing_but_the_executor_tables_chooses_by_plan_type():
    """A backend chooses what runs a plan from its table (EXECUTORS, SIMULATORS) through
    emulation.schedule.executor; anything else asks the plan (``slotted``, ``describe``,
    ``summary``), so a new plan type is a row in each table, not a branch in every module."""
    plans = {"Plan", "SlottedPlan", "ParallelPlan", "RelayPlan"}
    found = []
    for m, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                if names & plans:
                    found.append(f"{m}:{node.lineno}")
    assert found == []
    from emulation.emulator.execute import EXECUTORS
    from emulation.flowsim.run import SIMULATORS
    from emulation.schedule import FabricSchedule

    assert set(EXECUTORS) == set(SIMULATORS) == set(FabricSchedule.__args__)
