"""The collective kind's own code (the kind itself: :mod:`emulation.kinds.collective`): its run
on either backend (:mod:`.runner`), its report (:mod:`.report`: summary table, ``steps.csv``,
``timeline.png``), the comparison of its two backends (:mod:`.compare`), and the fabric at
Mininet's prompt (:mod:`.console`, ``ocslab up``)."""
