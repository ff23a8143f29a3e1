"""ocslab: packet/flow-level emulation of reconfigurable (optical circuit switched) ML fabrics."""

__version__ = "0.1.0"
