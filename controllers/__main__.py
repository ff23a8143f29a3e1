"""Launcher: ``python -m controllers [APP ...] --ofp-tcp-listen-port N --ocslab-fabric FILE
--ocslab-api-port M [--log-file F]``.

Leading APP names: ``circuit_switch``, ``routing``, ``api``, ``failover`` (default: all). Flags use the
ryu-manager names; OS-Ken 4.x has no ``osken-manager``, so this loads the apps with
``AppManager.run_apps`` on OS-Ken's native (threaded) hub (``docs/architecture.md``, machines).
"""

from __future__ import annotations

import logging
import os
import signal
import sys

APPS = {
    "circuit_switch": "controllers.circuit_switch",
    "routing": "controllers.routing",
    "api": "controllers.api",
    "failover": "controllers.failover",
}


def main(argv: list[str] | None = None) -> int:
    """Parse flags, load the apps, serve until SIGTERM/SIGINT. Exit status 2 on bad flags."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    n_apps = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
    apps, rest = argv[:n_apps], argv[n_apps:]
    unknown = [a for a in apps if a not in APPS]
    if unknown:
        print(f"controllers: unknown app {unknown[0]!r} (known: {', '.join(APPS)})", file=sys.stderr)
        return 2
    from os_ken import cfg
    from os_ken.base.app_manager import AppManager

    from controllers.state import OPTS

    cfg.CONF.register_cli_opts(OPTS, group="ocslab")
    if "log_file" not in cfg.CONF:
        cfg.CONF.register_cli_opts([cfg.StrOpt("log-file", help="write the log here")])
    try:
        cfg.CONF(args=rest, project="os_ken")
    except SystemExit as e:
        return 2 if e.code else 0
    if not cfg.CONF.ofp_tcp_listen_port:
        print("controllers: --ofp-tcp-listen-port is required (no default port)", file=sys.stderr)
        return 2
    if not cfg.CONF.ocslab.fabric:
        print("controllers: --ocslab-fabric FILE is required", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
        filename=cfg.CONF.log_file or None,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        AppManager.run_apps([APPS[a] for a in (apps or list(APPS))])
    except (KeyboardInterrupt, SystemExit, AttributeError):
        # OS-Ken's run_apps cleanup calls HubThread.kill(), which the native hub lacks.
        pass
    logging.shutdown()
    os._exit(0)  # hub threads are not daemons; end the process now


if __name__ == "__main__":
    sys.exit(main())
