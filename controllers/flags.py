"""ocslab's controller options (group ``ocslab``), registered on the ``CONF`` of the framework
the apps run on (:mod:`controllers.sdn`; OS-Ken and Ryu each have their own oslo.config one): ``--ocslab-fabric FILE``, ``--ocslab-wan FILE``,
``--ocslab-api-port N``, ``--ocslab-events FILE``, ``--ocslab-ocs-shards N``,
``--ocslab-ovs-ctl SOCKET``.

Ryu registers user options before it parses the command line from a file named by
``--user-flags``, so that ``ryu-manager --user-flags controllers/flags.py --ocslab-fabric F ...``
accepts them; ``python -m controllers`` calls :func:`register` itself. Importing this module
registers them (idempotent).
"""

from __future__ import annotations

from oslo_config import cfg

from controllers.sdn import cfg as runtime_cfg

OPTS = [
    cfg.StrOpt("fabric", help="fabric JSON written by the emulator (emulation.fabric.Fabric)"),
    cfg.StrOpt("wan", help="WAN slice JSON written by the WAN replay (controllers.wan_te)"),
    cfg.IntOpt("api-port", default=0, help="port of the JSON API on 127.0.0.1"),
    cfg.StrOpt("events", help="file the controller appends every event to, one JSON object per line "
                              "(controllers.state.FabricState.log_event), whatever the framework's log format"),
    cfg.IntOpt("ocs-shards", default=1, help="servers every OCS is sharded over (emulation.ocs_shards): one bridge "
                                           "per server, joined by lanes; 1: one bridge per OCS"),
    cfg.StrOpt("ovs-ctl", help="ovs-vswitchd's control socket (comma-separated: one per ovs-vswitchd holding our bridges): the circuit switch flushes the cached datapath "
                               "flows after every barrier, so that its timestamps hold on the wire "
                               "(controllers.ovs_datapath)"),
]


def register(conf=None) -> None:
    """Register :data:`OPTS` as command-line options of group ``ocslab`` (again is harmless;
    after the command line was parsed, as plain options, which config files can still set)."""
    conf = conf if conf is not None else runtime_cfg.CONF
    try:
        conf.register_cli_opts(OPTS, group="ocslab")
    except cfg.ArgsAlreadyParsedError:
        conf.register_opts(OPTS, group="ocslab")


register()
