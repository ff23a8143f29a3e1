"""``python -m emulation``: the ``ocslab`` command line (:mod:`emulation.cli`)."""

import sys

from emulation.cli import main

if __name__ == "__main__":
    sys.exit(main())
