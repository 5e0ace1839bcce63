//! kda-runtime: the same launch API on a CUDA device and on a CPU simulator.
