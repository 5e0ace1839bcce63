#!/usr/bin/env bash
# The project's one test command (README, .ci/run): formatting, lints, then
# every test of the workspace. PTX tests need ptxas: it is provisioned into
# .tools/ (git-ignored) from the pinned pip package when none is found.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== ptxas"
bash scripts/provision-ptxas.sh

echo "== rustfmt"
cargo fmt --all -- --check

echo "== clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== rustdoc (broken links, private links and bad markup are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

echo "== tests"
# nextest when available (parallel, per-test output); cargo test otherwise.
# Doctests are not run by nextest, so they follow with cargo test --doc.
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --release --no-fail-fast
    cargo test --workspace --locked --release --doc
else
    cargo test --workspace --locked --release --no-fail-fast
fi

echo "== fuzz (case files and IR text, 60 s each, seeded; corpus and reproducers replayed)"
bash scripts/fuzz.sh

echo "== templates (each builds and tests on its own, as a copy outside the repo would)"
bash templates/hgrn2-decode/ci.sh

echo "== python (kda package: wheel built by maturin, pytest on the simulator)"
bash scripts/test-python.sh
