#!/usr/bin/env bash
# CI for the template: build and test it on its own, as a copy outside the
# repository would be, against the repository's crates (path dependencies)
# and the versions its committed Cargo.lock pins. No GPU needed: the tests run
# the simulator; the ptxas check runs where ptxas is found and says
# "skipped" otherwise.
#
#   bash templates/hgrn2-decode/ci.sh      (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# Share the repository's build directory, so the kda crates and their
# dependencies are not built twice.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
# The repository's pinned ptxas (scripts/provision-ptxas.sh), if installed:
# the lookup in kda-ir starts at this crate, which has its own workspace.
if [[ -z "${KDA_PTXAS:-}" && -x "$root/.tools/ptxas/bin/ptxas" ]]; then
    export KDA_PTXAS="$root/.tools/ptxas/bin/ptxas"
fi
cd "$here"
cargo fmt --check
cargo clippy --release --locked --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --no-deps
cargo test --release --locked
