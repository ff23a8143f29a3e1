"""OS-Ken apps emulating optical circuit switches and multi-hop routing, and their launcher
(``python -m controllers``). Importing this package starts nothing."""

#: The apps of an ML fabric, in load order: what ``python -m controllers`` runs by default and
#: what every emulated fabric starts, before the user's own apps.
FABRIC_APPS = ("circuit_switch", "rotor", "parallel_ocs", "routing", "api", "failover", "opus")
