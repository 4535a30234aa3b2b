"""Sparse triangular solve (AG-SpTRSV): analysis, transforms, scheduling, scheme space,
the CPU oracle of a scheduled solve, the level-set baseline and the scheme selector."""
