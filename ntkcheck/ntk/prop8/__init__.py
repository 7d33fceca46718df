"""Seed 003 Prop. 8 checked on a data set: the named dependence structures, the kernel of the
Gram they predict, and the cross-check of the Gram against the CGF verdict."""
