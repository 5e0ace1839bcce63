#!/usr/bin/env bash
# The fuzz targets for a bounded time each (KDA_FUZZ_SECONDS, default 60),
# after replaying their checked-in corpus and crash reproducers. Each prints
# one line: inputs tried, the rate, inputs accepted, crashes and slow inputs
# found. Exits non-zero on any finding; reproducers land in fuzz/crashes/
# (check them in: the targets' tests replay them).
#
#   bash scripts/fuzz.sh                  # 60 s per target, seed 1
#   KDA_FUZZ_SEED=$RANDOM bash scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

export KDA_FUZZ_SECONDS="${KDA_FUZZ_SECONDS:-60}"
export KDA_FUZZ_SEED="${KDA_FUZZ_SEED:-1}"

# Every fuzz-<target> binary of the kda-fuzz crate (src/bin/fuzz-*.rs).
targets=$(cd fuzz/src/bin && ls fuzz-*.rs | sed 's/\.rs$//')

cargo build --release --locked -q -p kda-fuzz --bins
status=0
for target in $targets; do
  if ! "${CARGO_TARGET_DIR:-target}/release/$target"; then
    echo "fuzz: $target found failing inputs (see above)" >&2
    status=1
  fi
done
# The IR text target lives with the parser it fuzzes (kda-ir/tests/fuzz_text.rs):
# parse -> verify -> print/parse -> schedule -> PTX on mutated filetests.
if ! cargo test --release --locked -q -p kda-ir --test fuzz_text -- --nocapture mutated_ir_text_never_panics; then
  echo "fuzz: the IR text target found failing inputs (see above)" >&2
  status=1
fi
exit $status
