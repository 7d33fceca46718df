"""The seed's examples (seed 003 section 3.3, theory/seed-examples.md) as ready-made inputs.

Each :class:`SeedExample` holds the measures, the property the seed states, the verdict
it predicts and, for the negative examples, the null vector the seed gives (up to scale).
``ntkcheck decide`` with no input decides all of them; the tests pin every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..cgf import (
    Dirac,
    Empirical,
    EmpiricalConvolution,
    Family,
    Gaussian,
    GaussianConvolution,
    GaussianMixture2,
    Laplace,
    UniformCube,
)

__all__ = ["SeedExample", "seed_examples"]

F = Fraction


@dataclass(frozen=True, eq=False)
class SeedExample:
    """One row of the seed's example table."""

    name: str
    reference: str
    measures: tuple[Family, ...]
    property: str
    expected: str  # "independent" or "dependent"
    null_vector: tuple[Fraction, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "reference": self.reference,
            "n": len(self.measures),
            "property": self.property,
            "expected": self.expected,
            "null_vector": None if self.null_vector is None else [str(v) for v in self.null_vector],
        }


def _diag(*v: Any) -> list[list[Any]]:
    return [[v[i] if i == j else 0 for j in range(len(v))] for i in range(len(v))]


def seed_examples() -> list[SeedExample]:
    """All positive and negative examples of seed 003 section 3.3 and Remark 5."""
    u, v = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    two_u = Empirical(np.array([[0.0, 0.0], u]))
    two_v = Empirical(np.array([[0.0, 0.0], v]))
    x = np.array([[0.5, -1.0], [2.0, 0.25]])
    y = np.array([[-0.75, 1.5], [1.25, 3.0]])
    ex = Empirical(x)
    ey = Empirical(y)
    base = Empirical(np.array([[0.0, 0.0], [1.0, 0.5], [-0.5, 2.0]]))
    return [
        SeedExample("uniform cubes, radii 1, 3/2, 2", "seed 003 Ex. 3", tuple(UniformCube(r, 2) for r in ("1", "3/2", "2")), "strong", "independent"),
        SeedExample("uniform cubes, equal radii", "seed 003 Ex. 3 (hypothesis fails)", (UniformCube("1", 2), UniformCube("1", 2)), "weak", "dependent", (F(1), F(-1))),
        SeedExample("Laplace, covariances s I, s = 1/2, 1, 2", "seed 003 Ex. 4", tuple(Laplace(_diag(s, s)) for s in ("1/2", "1", "2")), "strong", "independent"),
        SeedExample("two-point Gaussian mixtures, m = e1, 2 e1, (1, 2)", "seed 003 Ex. 5", (GaussianMixture2([1, 0], _diag("1/2", "1/2")), GaussianMixture2([2, 0], _diag("1/2", "1/2")), GaussianMixture2([1, 2], _diag(1, "1/4"))), "strong", "independent"),
        SeedExample("uniform cubes convolved with Gaussians", "seed 003 Prop. 12", tuple(GaussianConvolution(UniformCube(r, 2), _diag(s, 1)) for r, s in (("1", "1"), ("3/2", "1/3"), ("2", "2"))), "strong", "independent"),
        SeedExample("product of two-point laws: mu3 = mu1 * mu2", "seed 003 Ex. 6 (first bullet)", (two_u, two_v, EmpiricalConvolution(two_u, two_v).as_empirical()), "weak", "dependent", (F(1), F(1), F(-1))),
        SeedExample("translate: mu2 = mu1 + (3, -1)", "seed 003 Ex. 6 (second bullet)", (base, Empirical(base.atoms + np.array([3.0, -1.0]))), "weak", "dependent", (F(1), F(-1))),
        SeedExample("three single Diracs", "seed 003 Ex. 6 (third bullet)", (Dirac([0, 0]), Dirac([1, 2]), Dirac([-3, 1])), "weak", "dependent", None),
        SeedExample("Gaussians with a shared covariance", "seed 003 Ex. 6 (fourth bullet)", (Gaussian([0, 0], _diag(1, 2)), Gaussian([1, -1], _diag(1, 2)), Gaussian([2, 5], _diag(1, 2))), "weak", "dependent", None),
        SeedExample("four Gaussians in d = 2 (n > d(d+1)/2 = 3)", "seed 003 Ex. 6 (fifth bullet)", (Gaussian([0, 0], _diag(1, 1)), Gaussian([1, 0], _diag(2, 1)), Gaussian([0, 1], [[2, 1], [1, 2]]), Gaussian([1, 1], _diag(1, 3))), "weak", "dependent", None),
        SeedExample("distinct atoms, still a product", "seed 003 Remark 5", (ex, ey, EmpiricalConvolution(ex, ey).as_empirical()), "weak", "dependent", (F(1), F(1), F(-1))),
    ]
