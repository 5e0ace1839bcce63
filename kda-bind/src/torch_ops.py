"""torch.library custom ops over kda kernels (kda-bind): a kernel instance
becomes an op that mutates the tensors the kernel writes, with a fake
(meta) implementation, so it runs inside torch.compile without graph
breaks and inside CUDA graphs. Imported by kda-bind only when asked."""

import itertools

_counter = itertools.count()


def make(kernel, name, params, tensors, written, ints):
    import torch

    if name is None:
        name = "kda::%s_%d" % (type(kernel).__name__.lower(), next(_counter))
    args = ", ".join(params)
    scope = {"_kernel": kernel}
    exec("def _op(%s) -> None:\n    _kernel(%s)\n" % (args, args), scope)
    op = scope["_op"]
    op.__annotations__ = {
        p: (torch.Tensor if p in tensors else (int if p in ints else float)) for p in params
    }
    op.__annotations__["return"] = None
    op = torch.library.custom_op(name, op, mutates_args=tuple(written))

    @op.register_fake
    def _fake(*_args):
        return None

    return op
