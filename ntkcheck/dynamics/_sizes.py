"""Memory of the deep-attention model before it is allocated (layers, heads, samples).

The forward pass that the adjoint needs keeps, per layer, the tokens ``X`` (n, S, d), the
queries ``A`` and head outputs ``M`` (n, S H, d) and the attention weights ``P`` (n, S H, S);
one backward pass holds as much again. The NTK over all parameters away from FixUp adds, for
``B`` adjoint seeds (``d`` for the readout loss, ``S d`` for the token loss), the query adjoints
(n, B, L S, H d), the adjoints (L, B, n, S, d) twice, and the Gram of the head outputs over
(sample, layer, atom), ``(n L S)^2`` entries. Counts are float64 entries; the estimates are
compared with the available memory (:func:`ntkcheck._memory.require_memory`) before any
allocation, so ``--layers 10^9`` is refused with the estimate instead of taking the machine.
"""

from __future__ import annotations

from .._memory import available_memory, format_bytes, require_memory
from ..errors import DomainError

__all__ = ["forward_bytes", "params_bytes", "ntk_work_bytes", "records_bytes", "require_forward", "require_params",
           "require_records", "check_ntk_work"]


def forward_bytes(n: int, S: int, d: int, H: int, layers: int) -> int:
    """Bytes of one forward pass kept for the adjoint and one backward pass over ``layers`` layers."""
    per_layer = n * S * (d + H * (2 * d + S))
    return 8 * 2 * int(layers) * per_layer


def params_bytes(H: int, d: int, sets: int) -> int:
    """Bytes of ``V``, ``Q`` (H, d, d) and ``b`` (H, d) for ``sets`` head sets (one per layer, or 1),
    with the copies the initialisation stacks."""
    return 8 * 3 * int(sets) * H * d * (2 * d + 1)


def ntk_work_bytes(n: int, S: int, d: int, H: int, layers: int, seeds: int) -> int:
    """Bytes of the NTK over all parameters that grow with the layers (see the module docstring)."""
    L = int(layers)
    return 8 * (n * seeds * L * S * H * d + 3 * L * seeds * n * S * d + (n * L * S) ** 2 + 2 * n * L * S * H * d)


def records_bytes(records: int, n_params: int, n_outputs: int) -> int:
    """Bytes of ``records`` stored states (``n_params`` entries), their outputs (``n_outputs``) and
    the per-record lists, with the flow times of the records."""
    return int(records) * (8 * (2 * n_params + n_outputs + 8) + 400)


def require_records(records: int, n_params: int, n_outputs: int) -> None:
    """Refuse a number of records whose stored states would not fit in memory."""
    require_memory(records_bytes(records, n_params, n_outputs),
                   f"{records} records of {n_params} parameters each", "--records")


def require_forward(n: int, S: int, d: int, H: int, layers: int) -> None:
    """Refuse a model whose forward and backward passes would not fit in memory."""
    require_memory(forward_bytes(n, S, d, H, layers),
                   f"the forward and backward passes of {layers} layers ({H} heads, {n} samples of up to {S} atoms, "
                   f"d = {d})", "--layers (or --heads, or the samples)")


def require_params(H: int, d: int, sets: int) -> None:
    """Refuse head sets that would not fit in memory."""
    require_memory(params_bytes(H, d, sets), f"{sets} head set(s) of {H} heads in d = {d}",
                   "--heads (or --layers with --per-layer)")


def check_ntk_work(n: int, S: int, d: int, H: int, layers: int, seeds: int) -> None:
    """A :class:`~ntkcheck.errors.DomainError` (the flow then records no NTK there and says why)
    when the layer-dependent work of the NTK over all parameters exceeds the available memory."""
    need, avail = ntk_work_bytes(n, S, d, H, layers, seeds), available_memory()
    if need > avail:
        raise DomainError(f"the NTK over all parameters away from FixUp needs about {format_bytes(need)} for "
                          f"{layers} layers, more than the {format_bytes(avail)} available; use fewer layers, the "
                          "readout loss, or fewer NTK records (--ntk-records 0)")
