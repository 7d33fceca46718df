"""The seeds' limit theorems, measured: one module per experiment, above the dynamics.

What lives here: the rate fit and the experiment registry (``rates``), and one module per
limit theorem with its own reference solution: propagation of chaos in the tokens
(``chaos_tokens``, reference ``_chaos_tokens_ref``), the law of large numbers over heads
(``heads_lln``), the depth-heads scaling limit under AdamW (``depth_heads``, optimiser
``_adamw``), mean-field Langevin (``langevin``, models ``_langevin_model`` and, where the
log-Sobolev constant is proved, ``_langevin_lsi``), the low-temperature concentration
(``low_temperature``), the stability constants of the well-posedness theorems (``stability``,
constants ``_stability_bounds``) and the joint (N, H) fluctuations (``joint_fluctuations``).
``ntkcheck experiment NAME`` runs them.

May import: :mod:`ntkcheck.dynamics` and everything below it.
"""

from __future__ import annotations

from .rates import EXPERIMENTS as EXPERIMENTS
from .rates import LimitExperiment as LimitExperiment
from .rates import RateFit as RateFit
from .rates import experiment_module as experiment_module
from .rates import fit_rate as fit_rate
from .rates import run_experiment as run_experiment

__all__ = ["EXPERIMENTS", "LimitExperiment", "RateFit", "experiment_module", "fit_rate",
           "run_experiment"]
