"""Launcher: ``python -m controllers [APP ...] --ofp-tcp-listen-port N --ocslab-fabric FILE
--ocslab-api-port M [--log-file F]``, or ``python -m controllers wan_te --ofp-tcp-listen-port N
--ocslab-wan FILE --ocslab-api-port M`` for a WAN slice's TE controller.

Leading APP names: ``circuit_switch``, ``routing``, ``api``, ``failover``, ``opus`` (default:
these five), ``wan_te`` (alone), or the path of your own app's ``.py`` file (with no built-in name
given, it runs beside the five). Flags use the
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

APPS = {
    "circuit_switch": "controllers.circuit_switch",
    "routing": "controllers.routing",
    "api": "controllers.api",
    "failover": "controllers.failover",
    "opus": "controllers.opus",
    "wan_te": "controllers.wan_te",
}
#: The apps of an ML fabric (the default set); ``wan_te`` runs alone.
FABRIC_APPS = ("circuit_switch", "routing", "api", "failover", "opus")


def main(argv: list[str] | None = None) -> int:
    """Parse flags, load the apps, serve until SIGTERM/SIGINT. Exit status 2 on bad flags."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    n_apps = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
    apps, rest = argv[:n_apps], argv[n_apps:]
    unknown = [a for a in apps if a not in APPS and not (a.endswith(".py") and os.path.isfile(a))]
    if unknown:
        print(f"controllers: unknown app {unknown[0]!r} (known: {', '.join(APPS)}, or a path to your app's .py file)",
              file=sys.stderr)
        return 2
    from controllers import flags  # noqa: F401 - registers --ocslab-*
    from controllers.sdn import RUNTIME, app_manager, cfg

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
    if not [a for a in apps if a in APPS]:  # only your own apps: beside the fabric's
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
    manager.load_apps([APPS.get(a, os.path.abspath(a)) for a in apps])
    manager.instantiate_apps(**manager.create_contexts())
    stop.wait()
    # run_apps would now kill the apps' hub threads, which the native hub cannot do (threads are
    # not killable); close the apps, then end the process with its non-daemon hub threads.
    manager.close()
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
