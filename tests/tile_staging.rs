//! Tiles of a `#[stage_through_shared]` tensor: one bulk copy moves the
//! tile's bytes as they lie in memory, so the trace accepts only a tile
//! whose elements are contiguous there.

use kda::cluster_kernel;

#[cluster_kernel(block = 32, name = "tile_every_other")]
fn tile_every_other(
    #[stage_through_shared]
    #[strides(16, 2)]
    w: Tensor<f32, rows, 8>,
) {
    // One row of 8 elements 2 apart: a 32-byte bulk copy from its start
    // would read elements 0..8 of the row's memory, half of them another
    // column's.
    let tile = w.tile([0u32, 0u32], [1, 8]);
    tile.init();
}

#[test]
#[should_panic(expected = "innermost strides must be 8 and 1")]
fn a_one_row_tile_with_a_strided_innermost_dimension_is_refused() {
    tile_every_other();
}

#[cluster_kernel(block = 32, name = "tile_too_big")]
fn tile_too_big(
    #[stage_through_shared]
    #[strides(65536, 1)]
    w: Tensor<f32, rows, 65536>,
) {
    // 65536 × 65536 f32 elements: 2^34 bytes, which a u32 byte count wraps
    // to 0.
    let tile = w.tile([0u32, 0u32], [65536, 65536]);
    tile.init();
}

#[test]
#[should_panic(expected = "kda: a tile of 65536 rows of 65536 `w` elements has more than")]
fn a_tile_whose_bytes_overflow_is_refused_by_name() {
    tile_too_big();
}
