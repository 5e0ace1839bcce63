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

# The Python binding (python/): the abi3 wheel built by maturin, installed
# into the repository's test environment, and its pytest on the simulator.
venv="$root/.venv-py"
if [[ ! -x "$venv/bin/python" ]]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    maturin==1.16.0 numpy==2.2.6 pytest==8.3.5
wheels="$CARGO_TARGET_DIR/wheels-template"
rm -rf "$wheels"
"$venv/bin/python" -m maturin build --release --locked --quiet -m python/Cargo.toml --out "$wheels"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$wheels"/hgrn2_decode-*.whl
(cd python/tests && "$venv/bin/python" -m pytest -q -p no:cacheprovider .)
