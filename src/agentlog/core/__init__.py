"""The pure kernel: events, JSON values, the surface fold, packed chunk runs, ``Session``, fork and
repair rules, invariants and checkpoints. No I/O, and no import from the rest of the package."""
