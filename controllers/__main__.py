"""Launcher: ``python -m controllers [APP ...] --ofp-tcp-listen-port N --ocslab-fabric FILE
--ocslab-api-port M [--log-file F]``, or ``python -m controllers wan_te --ofp-tcp-listen-port N
--ocslab-wan FILE --ocslab-api-port M`` for a WAN slice's TE controller.

Leading APP names: ``circuit_switch``, ``routing``, ``api``, ``failover``, ``opus`` (default:
these five), ``wan_te`` (alone), ``ofctl_rest`` (the framework's stock REST app,
``<framework>.app.ofctl_rest``, with its WSGI server on ``--wsapi-host``/``--wsapi-port``; refused
in one line where the framework lacks it, as OS-Ken 4.x does), or the path of your own app's ``.py``
file (with no built-in name but ``ofctl_rest`` given, these run beside the five). Flags use the
ryu-manager names; OS-Ken 4.x has no ``osken-manager``, so this loads and instantiates the apps
with OS-Ken's ``AppManager`` on its native (threaded) hub, as ``AppManager.run_apps`` does, and
serves until SIGTERM or SIGINT (``docs/architecture.md``, machines).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from controllers import FABRIC_APPS
from controllers.app_check import check_apps

APPS = {
    "circuit_switch": "controllers.circuit_switch",
    "rotor": "controllers.rotor",
    "parallel_ocs": "controllers.parallel_ocs",
    "routing": "controllers.routing",
    "api": "controllers.api",
    "failover": "controllers.failover",
    "opus": "controllers.opus",
    "wan_te": "controllers.wan_te",
}
#: The framework's own apps loadable by name: name -> module under the framework's package.
STOCK_APPS = {"ofctl_rest": "app.ofctl_rest"}


def main(argv: list[str] | None = None) -> int:
    """Parse flags, load the apps, serve until SIGTERM/SIGINT. Exit status 2 on bad flags."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    n_apps = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
    apps, rest = argv[:n_apps], argv[n_apps:]
    unknown = [a for a in apps if a not in APPS and a not in STOCK_APPS and not a.endswith(".py")]
    problem = check_apps([a for a in apps if a.endswith(".py")])
    if unknown or problem:
        print(f"controllers: unknown app {unknown[0]!r} (known: {', '.join([*APPS, *STOCK_APPS])}, or a path to your "
              f"app's .py file)" if unknown else f"controllers: {problem}", file=sys.stderr)
        return 2
    from controllers import flags  # noqa: F401 - registers --ocslab-*
    from controllers.sdn import RUNTIME, app_manager, cfg, hub

    package = RUNTIME.replace("-", "_")
    wsgi = None
    if any(a in STOCK_APPS for a in apps):
        import importlib
        import importlib.util

        missing = [f"{package}.{STOCK_APPS[a]}" for a in apps if a in STOCK_APPS
                   if importlib.util.find_spec(f"{package}.{STOCK_APPS[a]}") is None]
        if missing or importlib.util.find_spec(f"{package}.app.wsgi") is None:
            print(f"controllers: this {RUNTIME} has no {(missing or [package + '.app.wsgi'])[0]}: run it under Ryu "
                  "(ryu-manager)", file=sys.stderr)
            return 2
        wsgi = importlib.import_module(f"{package}.app.wsgi")  # registers --wsapi-host, --wsapi-port

    AppManager = app_manager.AppManager
    if "log_file" not in cfg.CONF:
        cfg.CONF.register_cli_opts([cfg.StrOpt("log-file", help="write the log here")])
    try:
        cfg.CONF(args=rest, project=RUNTIME.replace("-", "_"))
    except SystemExit as e:
        return 2 if e.code else 0
    if not cfg.CONF.ofp_tcp_listen_port:
        print("controllers: --ofp-tcp-listen-port is required (no default port)", file=sys.stderr)
        return 2
    if not [a for a in apps if a in APPS]:  # only your own apps (or stock ones): beside the fabric's
        apps = list(FABRIC_APPS) + apps
    if "wan_te" in apps and len(apps) > 1:
        print("controllers: wan_te runs alone", file=sys.stderr)
        return 2
    need = ("wan", "--ocslab-wan") if apps == ["wan_te"] else ("fabric", "--ocslab-fabric")
    if not getattr(cfg.CONF.ocslab, need[0]):
        print(f"controllers: {need[1]} FILE is required", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
        filename=cfg.CONF.log_file or None,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    manager = AppManager.get_instance()
    manager.load_apps([APPS[a] if a in APPS else f"{package}.{STOCK_APPS[a]}" if a in STOCK_APPS else os.path.abspath(a)
                       for a in apps])
    manager.instantiate_apps(**manager.create_contexts())
    if wsgi is not None:  # as the framework's manager does: the REST apps' WSGI server
        webapp = wsgi.start_service(manager)
        if webapp is not None:
            hub.spawn(webapp)
    stop.wait()
    # run_apps would now kill the apps' hub threads, which the native hub cannot do (threads are
    # not killable); close the apps, then end the process with its non-daemon hub threads.
    manager.close()
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
