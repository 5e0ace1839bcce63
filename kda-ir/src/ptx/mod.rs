//! PTX backend for sm_90a.
