"""kda: fused recurrent decode kernels (KdaSplit, GDN, Mamba-2) launched in
place on CUDA tensors (torch, cupy: DLPack or __cuda_array_interface__, on
torch's current stream by default, capturable in CUDA graphs), or on the
CPU simulator for NumPy arrays. See docs/python.md."""

from ._kda import GdnDecode, KdaSplit, Mamba2Decode

__all__ = ["GdnDecode", "KdaSplit", "Mamba2Decode"]
