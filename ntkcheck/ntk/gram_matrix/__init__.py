"""The NTK Gram at FixUp: the heads and their attention features, the Gram accumulated over
head blocks, its extremal spectrum, and the pipeline of :func:`gram`."""
