"""Claims of the limit-theorem experiments (:mod:`ntkcheck.limits`), one module per experiment.

Each module turns one experiment's fitted rates into a claim outcome through the shared rule
of ``_common``; the seed claims about CGFs, the NTK and local convergence are in the parent
package.
"""
