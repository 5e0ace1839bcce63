"""CUDA stream handles for launches: the array library's current stream by
default, or the stream the caller names."""

import sys


def current(device):
    """The current stream of `device` of the library the caller uses: torch
    if it is imported, else cupy; the legacy default stream (0) otherwise.
    Neither library is imported here."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_stream(device).cuda_stream)
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return int(cupy.cuda.get_current_stream().ptr)
    return 0


def handle(stream):
    """The raw CUstream of `stream`: an int, a torch stream (`.cuda_stream`)
    or a cupy stream (`.ptr`)."""
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise TypeError(
        "stream: expected an int handle, a torch.cuda.Stream or a cupy stream; got "
        + type(stream).__name__
    )
