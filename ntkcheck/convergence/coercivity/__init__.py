"""Certified coercivity of the NTK on a split region around FixUp (issue 21)."""
