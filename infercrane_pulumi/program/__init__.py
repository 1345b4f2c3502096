"""The Pulumi program: one component per intent (``components``), the program every driver runs
(``program``), what a stack applied as its outputs record it (``records``), and what a driver
hands the program it serves (``handoff``).
"""
