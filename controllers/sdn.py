"""The SDN framework the controller apps run on: OS-Ken (Ryu's maintained fork) or Ryu itself.
Both have the same app API (``app_manager``, ``ofp_event``, ``set_ev_cls``, ``hub``, the
``ofproto`` parsers, ``cfg``); the apps import it from here only.

Which one: under ``ryu-manager`` (it imports ``ryu`` before any app), Ryu; otherwise OS-Ken, or Ryu
where OS-Ken is not installed (the Python 3.9 environment made for Ryu 4.34, which does not
import on Python 3.10+). :data:`RUNTIME` says which (``"os-ken"`` or ``"ryu"``).
"""

from __future__ import annotations

import sys

if "ryu" in sys.modules and "os_ken" not in sys.modules:
    _use = "ryu"
else:
    try:
        import os_ken  # noqa: F401
        _use = "os-ken"
    except ImportError:
        _use = "ryu"

if _use == "os-ken":
    from os_ken import cfg
    from os_ken.base import app_manager
    from os_ken.controller import event, ofp_event
    from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
    from os_ken.lib import hub
    from os_ken.ofproto import ofproto_v1_3

    App = app_manager.OSKenApp
else:
    from ryu import cfg
    from ryu.base import app_manager
    from ryu.controller import event, ofp_event
    from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
    from ryu.lib import hub
    from ryu.ofproto import ofproto_v1_3

    App = app_manager.RyuApp

#: ``"os-ken"`` or ``"ryu"``: the framework the apps run on in this process.
RUNTIME: str = _use

__all__ = ["RUNTIME", "App", "app_manager", "cfg", "event", "ofp_event", "set_ev_cls", "hub", "ofproto_v1_3",
           "CONFIG_DISPATCHER", "MAIN_DISPATCHER", "DEAD_DISPATCHER"]
