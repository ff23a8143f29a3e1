"""Your controller app, checked before anything starts: one line for each mistake the framework
would otherwise report deep inside the controller's log.

OS-Ken and Ryu load an app file (``--app PATH``) by importing it as a top-level module named after
the file and taking the first app class *defined* in it; the class name becomes the app's
service-brick name, which must be unique. A syntax error, a second app class, a taken class name
or a file name that is already a module otherwise surfaces as a bare ``AssertionError`` or a
``ModuleNotFoundError`` thirty lines below the real cause, after the fabric was built. This module
reads the file (it never imports or runs it) and names the mistake: :func:`check_apps`.

Standard library only: it runs under the framework's Python as well as ocslab's.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys

#: Base classes that make a class an app (the framework's and ocslab's).
APP_BASES = frozenset({"OcsLabApp", "OpenFlowApp", "OSKenApp", "RyuApp"})
#: The built-in apps' modules (``controllers/__main__.py``'s names) whose classes are taken.
BUILTIN_MODULES = ("circuit_switch", "rotor", "parallel_ocs", "timing", "routing", "api", "failover", "opus", "wan_te",
                   "base")
#: Service-brick names the frameworks take themselves (their OpenFlow handler, the stock REST app).
FRAMEWORK_NAMES = frozenset({"ofp_event", "OFPHandler", "RestStatsApi", "DPSet"})


def app_classes(tree: ast.Module) -> list[ast.ClassDef]:
    """The top-level classes of ``tree`` that are apps: a base named in :data:`APP_BASES`
    (``OcsLabApp`` or ``base.OcsLabApp``), or another app class of the same file, in file order."""
    found: list[ast.ClassDef] = []
    names = set(APP_BASES)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                     for b in node.bases}
            if bases & names:
                found.append(node)
                names.add(node.name)
    return found


def builtin_app_names() -> frozenset[str]:
    """Class names of the built-in apps and their bases (read from ``controllers/``), and the
    frameworks' own service-brick names: the names an app of yours cannot have."""
    here = os.path.dirname(os.path.abspath(__file__))
    names = set(FRAMEWORK_NAMES)
    for module in BUILTIN_MODULES:
        with open(os.path.join(here, module + ".py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        names |= {c.name for c in tree.body if isinstance(c, ast.ClassDef)}
    return frozenset(names)


def examine(path: str, taken: frozenset[str] | set[str] = frozenset()) -> tuple[str | None, list[str]]:
    """``(problem, app class names)`` of the app file ``path``: what is wrong with the app file ``path``, in one line naming the file (and line), or None.

    :param taken: class names already in use (the built-in apps' and earlier ``--app`` files');
        :func:`builtin_app_names` is always added.

    Refused: not an existing ``.py`` file; a syntax error (``FILE:LINE: SyntaxError: ...``); no
    app class, or more than one (the framework loads only the first); a class name taken; a file
    name that is an importable module already (``json.py``, ``networkx.py``: the framework would
    import that module instead).
    """
    if not (path.endswith(".py") and os.path.isfile(path)):
        return f"{path!r} is not a .py file", []
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        tree = ast.parse(compile(source, path, "exec", ast.PyCF_ONLY_AST))
    except SyntaxError as e:
        where = f"{path}:{e.lineno}" if e.lineno else path
        return f"{where}: SyntaxError: {e.msg}", []
    except (UnicodeDecodeError, ValueError) as e:
        return f"{path}: not readable Python source ({e})", []
    classes = app_classes(tree)
    if not classes:
        if any(isinstance(node, ast.ClassDef) and node.bases for node in tree.body):
            return None, []  # its classes derive from imported ones: only importing it could tell
        return f"{path}: defines no app class (subclass controllers.base.OcsLabApp)", []
    if len(classes) > 1:
        listed = ", ".join(f"{c.name} (line {c.lineno})" for c in classes)
        return (f"{path}: defines {len(classes)} app classes, {listed}; the framework loads only the first: "
                "put one app class in each file"), []
    cls = classes[0]
    if cls.name in builtin_app_names() or cls.name in taken:
        who = "a built-in app" if cls.name in builtin_app_names() else "another --app file"
        return (f"{path}:{cls.lineno}: class name {cls.name} is taken by {who} (the class name is the app's "
                "service-brick name, unique per controller): rename the class"), []
    module = os.path.splitext(os.path.basename(path))[0]
    if not module.isidentifier():
        return f"{path}: the file name must be a Python module name (letters, digits, _), e.g. my_app.py", []
    if module in sys.builtin_module_names or module in ("controllers", "emulation", "topologies"):
        return f"{path}: the file name {module}.py is a module already: rename the file (e.g. my_{module}.py)", []
    try:
        spec = importlib.util.find_spec(module) if module not in sys.modules else sys.modules[module].__spec__
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin and os.path.abspath(spec.origin) != os.path.abspath(path):
        return (f"{path}: the file name {module}.py is the module {module} already ({spec.origin}); the "
                f"framework would import that one: rename the file (e.g. my_{module}.py)"), []
    return None, [cls.name]


def check_apps(paths: list[str] | tuple[str, ...]) -> str | None:
    """The first problem of the app files ``paths`` (:func:`examine`, each class name free of
    the built-in apps' and of the files before it; two files of the same name refused), or None."""
    taken: set[str] = set()
    stems: dict[str, str] = {}
    for path in paths:
        problem, names = examine(path, taken)
        if problem:
            return problem
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem in stems:
            return f"{path}: another --app file has the name {stem}.py ({stems[stem]}): rename one"
        stems[stem] = path
        taken |= set(names)
    return None
