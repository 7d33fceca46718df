"""Past one process: screening sweeps and one large Gram on ``dask.distributed``.

What lives here: the sweep over initialisation laws, heads, seeds and files (``sweeps``), the
NTK Gram accumulated over head blocks and tiles on the workers (``gram``, its tasks in
``_accumulate``), its certified lower bound on the workers (``_certified``, on the tiled linear
algebra of ``_tiled``: blocked Cholesky, solves, products), and the client helper
``dask_client`` with the HPC conventions (``_cluster``: scheduler files, one BLAS thread per
worker, Ctrl-C). Everything here needs the optional ``ntkcheck[dask]``
dependencies except the serial sweep.

May import: :mod:`ntkcheck.screening`, :mod:`ntkcheck.ntk`, :mod:`ntkcheck.io`,
:mod:`ntkcheck.cgf` and the base modules.
"""

from __future__ import annotations

from ._cluster import OneBlasThread as OneBlasThread
from ._cluster import dask_client as dask_client
from .gram import DistributedGram as DistributedGram
from .gram import distributed_gram as distributed_gram
from .sweeps import SweepResult as SweepResult
from .sweeps import SweepRow as SweepRow
from .sweeps import sweep as sweep
from .sweeps import sweep_grid as sweep_grid

__all__ = ["SweepRow", "SweepResult", "sweep", "sweep_grid", "distributed_gram", "DistributedGram",
           "dask_client", "OneBlasThread"]
