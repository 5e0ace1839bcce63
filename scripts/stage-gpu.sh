#!/usr/bin/env bash
# Build the GPU suite here, run it on a GPU machine with no Rust toolchain.
#
# Builds (release) every GPU test target of the workspace (integration tests
# named `gpu_*`) and every bench target, strips the binaries into .stage/
# (git-ignored) and writes .stage/run.sh, which runs them all, then
# compute-sanitizer on the GPU demo test, then the benches, logging each step
# to the folder given as its argument. See docs/gpu.md.
#
#   bash scripts/stage-gpu.sh          # here
#   bash .stage/run.sh <log dir>       # on the GPU machine (any copy of .stage/ works)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stage="$root/.stage"
# The staged folder travels to GPU machines with a 64 MiB limit.
max_mib=60

# "name<TAB>path" of every executable of target kind $1 in cargo's JSON messages on stdin.
executables() {
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and sys.argv[1] in m["target"]["kind"]:
        print(m["target"]["name"] + "\t" + m["executable"])
' "$1"
}

echo "== building GPU tests (release)"
tests=$(cargo test --workspace --release --locked --no-run --message-format=json --test 'gpu_*' | executables test)
echo "== building benches"
benches=$(cargo bench --workspace --locked --no-run --message-format=json --bench '*' | executables bench)

echo "== building the flagship CLI (main job, bench, autotune)"
cargo build --release --locked -p kda-split --bin kda-split
echo "== building pipelined-copy (its check and --bench)"
cargo build --release --locked -p pipelined-copy --bin pipelined-copy
echo "== building decode-bench (the GDN / Mamba-2 schedule sweep)"
cargo build --release --locked -p decode-bench --bin decode-bench

echo "== building the Python wheel (kda, abi3; docs/python.md)"
venv=.venv-py
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check maturin==1.16.0
rm -rf target/wheels-stage
"$venv/bin/python" -m maturin build --release --locked --quiet -m kda-python/Cargo.toml --out target/wheels-stage
echo "== building the template's wheel (templates/hgrn2-decode, its own workspace)"
CARGO_TARGET_DIR="$root/target" "$venv/bin/python" -m maturin build --release --locked --quiet \
    -m templates/hgrn2-decode/python/Cargo.toml --out target/wheels-stage

rm -rf "$stage"
mkdir -p "$stage/tests" "$stage/bench" "$stage/bin"
strip_cmd=$(command -v strip || true)
stage_bin() { # <folder> <name> <path>
    local dest="$stage/$1/$2"
    if [[ -e "$dest" ]]; then
        echo "error: two $1 binaries are named $2; rename one target" >&2
        exit 1
    fi
    cp "$3" "$dest"
    if [[ -n "$strip_cmd" ]]; then "$strip_cmd" "$dest"; fi
}
while IFS=$'\t' read -r name path; do
    [[ -n "$name" ]] && stage_bin tests "$name" "$path"
done <<<"$tests"
while IFS=$'\t' read -r name path; do
    [[ -n "$name" ]] && stage_bin bench "$name" "$path"
done <<<"$benches"
stage_bin bin kda-split target/release/kda-split
stage_bin bin pipelined-copy target/release/pipelined-copy
stage_bin bin decode-bench target/release/decode-bench
# The wheel with the Python tests and the benchmark against fla.
mkdir -p "$stage/python"
cp target/wheels-stage/kda-*.whl "$stage/python/"
cp -r kda-python/tests kda-python/bench "$stage/python/"
cp docs/python.md "$stage/python/python.md"  # its examples run in tests/test_docs.py
cp scripts/python-venv-docs.sh "$stage/python/venv-docs.sh"
# The template: its wheel, its Python tests and reference (fla comparison,
# torch.compile, timings).
mkdir -p "$stage/template"
mv target/wheels-stage/hgrn2_decode-*.whl "$stage/template/"
cp -r templates/hgrn2-decode/python/tests templates/hgrn2-decode/reference.py "$stage/template/"
find "$stage/python" "$stage/template" -name __pycache__ -prune -exec rm -rf {} +
# fla (ops only: fla-core, pure Python over triton) and einops, for the
# agreement test and the benchmark; the GPU machine has no network. Pinned to
# the fla release the issue's figures were measured with. Skipped offline.
mkdir -p "$stage/python/wheels"
if ! "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --dest "$stage/python/wheels" fla-core==0.6.0 einops==0.8.1; then
    echo "warning: could not download fla-core/einops; fla's tests and rows will be skipped" >&2
fi
if [[ ! -x "$stage/tests/gpu_demo" ]]; then
    echo "error: no gpu_demo test binary was built" >&2
    exit 1
fi

{
    echo "commit: $(git rev-parse --verify -q HEAD || echo unknown)"
    echo "uncommitted changes: $(git status --porcelain 2>/dev/null | wc -l) files"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
    echo "rustc: $(rustc --version)"
} >"$stage/manifest.txt"

cat >"$stage/run.sh" <<'RUN'
#!/usr/bin/env bash
# Run the staged GPU suite: bash run.sh <log dir>. Builds nothing.
# Needs the NVIDIA driver; compute-sanitizer is used when found (PATH,
# $CUDA_HOME/bin, /usr/local/cuda/bin). Each step logs to <log dir>/<step>.log
# and is limited to $KDA_STEP_TIMEOUT seconds (default 300); the exit status
# is 0 only when every step passed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: run.sh <log dir>}"
mkdir -p "$out" && out="$(cd "$out" && pwd)"
# GPU tests fail instead of skipping when no GPU can be opened.
export KDA_REQUIRE_GPU=1
limit="${KDA_STEP_TIMEOUT:-300}"
status=0
summary=()

took=0
record() { # <step> <result>
    summary+=("$(printf '%-30s %5ss  %s' "$1" "$took" "$2")")
    echo "   $2 (${took}s)"
    took=0
}

# Run <command...> with the step limit, logging to <log dir>/<step>.log;
# sets rc to its exit status (124: timed out, noted in the log).
run_logged() { # <step> <command...>
    local name="$1" t0=$SECONDS
    shift
    echo "== $name"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    [[ $rc -eq 124 ]] && echo "(timed out after ${limit}s)" >>"$out/$name.log"
    took=$((SECONDS - t0))
}

# KDA_STEPS (an extended regex) keeps only the steps whose names match it,
# KDA_SKIP drops those that match. KDA_SKIP unset drops only
# sanitizer-racecheck-kda-1, which has run past the step limit in every
# suite that ran it (and once held a whole 600 s call); KDA_SKIP='' runs it.
KDA_SKIP="${KDA_SKIP-racecheck-kda-1\$}"
wanted() { # <step>
    [[ -n "${KDA_STEPS:-}" && ! $1 =~ $KDA_STEPS ]] && return 1
    [[ -n "${KDA_SKIP:-}" && $1 =~ $KDA_SKIP ]] && return 1
    return 0
}

step() { # <step> <command...>
    local rc
    wanted "$1" || return 0
    run_logged "$@"
    if [[ $rc -eq 0 ]]; then
        record "$1" ok
    else
        record "$1" "FAILED (exit $rc, see $1.log)"
        status=1
    fi
}

# Racecheck counts warnings towards --error-exitcode; its warnings here are
# the known uniform-datapath attribution of `mbarrier.init` to another lane
# of the initialising warp (docs/validation.md). So the verdict is read
# from the summary line: the program passed and "(0 errors", warnings
# counted in the result so they stay visible.
racecheck_step() { # <step> <command...>
    local rc line
    wanted "$1" || return 0
    run_logged "$@"
    line=$(grep -h "RACECHECK SUMMARY" "$out/$1.log" | tail -n 1)
    if [[ $rc -eq 0 && $line == *"(0 errors, "* ]]; then
        record "$1" "ok (${line##*(}"
    else
        record "$1" "FAILED (exit $rc, ${line:-no racecheck summary}; see $1.log)"
        status=1
    fi
}

cp "$here/manifest.txt" "$out/manifest.txt"
{ nvidia-smi 2>&1 || echo "nvidia-smi not found"; } >"$out/nvidia-smi.log"

for t in "$here"/tests/*; do
    step "test-$(basename "$t")" "$t" --include-ignored --test-threads=1 --nocapture
done

sanitizer=$(command -v compute-sanitizer || true)
for dir in "${CUDA_HOME:-}" /usr/local/cuda; do
    if [[ -z "$sanitizer" && -n "$dir" && -x "$dir/bin/compute-sanitizer" ]]; then
        sanitizer="$dir/bin/compute-sanitizer"
    fi
done
for tool in memcheck racecheck synccheck; do
    if [[ -n "$sanitizer" ]]; then
        if [[ $tool == racecheck ]]; then
            # A hang is reported (which warps wait on which barrier) after
            # 30 s instead of running into the step's limit.
            run=(racecheck_step)
            args=(--tool racecheck --racecheck-deadlock-timeout 30000 --racecheck-continue-on-deadlock no)
        else
            run=(step)
            args=(--tool "$tool" --error-exitcode 1)
        fi
        "${run[@]}" "sanitizer-$tool-demo" "$sanitizer" "${args[@]}" "$here/tests/gpu_demo" --test-threads=1 --nocapture
        "${run[@]}" "sanitizer-$tool-bulk-copy" "$sanitizer" "${args[@]}" "$here/tests/gpu_bulk_copy" --test-threads=1 --nocapture
        # Remote arrivals: a ring released by the peer CTA (mbarrier.arrive.remote).
        "${run[@]}" "sanitizer-$tool-remote-ring" "$sanitizer" "${args[@]}" "$here/tests/gpu_ring_remote_release" --test-threads=1 --nocapture
        # The ring kernel: 1..=4 stages, its check's tile counts, each output path.
        for path in st bulk; do
            "${run[@]}" "sanitizer-$tool-pipelined-copy-$path" "$sanitizer" "${args[@]}" "$here/bin/pipelined-copy" --path "$path"
        done
        # KdaSplit: one configuration per early level (matrix points 0, 1, 4,
        # 5 are early 0, 1, 2, 3; 5 is also the one-CTA cluster) and the
        # T > 1 bulk-store family (17: each token's rows through the shared
        # ring, padding and a write hole), one launch each so racecheck stays
        # in time.
        for point in 0 1 4 5 17; do
            KDA_GPU_POINTS=$point "${run[@]}" "sanitizer-$tool-kda-$point" "$sanitizer" "${args[@]}" \
                "$here/tests/gpu_kda" --test-threads=1 --nocapture
        done
    else
        echo "== sanitizer-$tool"
        record "sanitizer-$tool" "skipped (compute-sanitizer not found)"
    fi
done

for b in "$here"/bench/*; do
    step "bench-$(basename "$b")" "$b"
done

# The flagship's main job (on the GPU) and its benchmark sweep.
step "main-job" "$here/bin/kda-split"
step "bench-kda-split" "$here/bin/kda-split" bench --json "$out/bench-kda-split.json"
# Where a CTA's lifetime goes at the issue's main T = 1 and T = 4 points
# (CTA timeline probes, docs/gpu.md; KDA_STEPS=trace runs them alone).
step "trace-kda-split" "$here/bin/kda-split" bench --heads 12 --batch 128 --tokens 1 --schedule auto --trace --budget-ms 100 --json "$out/trace-kda-split.json"
step "trace-kda-split-t4" "$here/bin/kda-split" bench --heads 12 --batch 64 --tokens 4 --schedule auto --trace --budget-ms 100 --json "$out/trace-kda-split-t4.json"
# pipelined-copy: its check matrix on the GPU, then 1 GiB against the copy ceiling.
step "main-pipelined-copy" "$here/bin/pipelined-copy"
step "bench-pipelined-copy" "$here/bin/pipelined-copy" --bench
# GDN (HK4 HV8, T 1 and 4) and Mamba-2 (H24 G1): every schedule of their
# sweep lists at batch 128, the defaults at 1, 64 and 512, state rotated over
# >= 4x L2, against the driver copy measured in the same run and each
# point's same-bytes copy (about 50 s, 30 of them the copies;
# KDA_STEPS=bench-gdn-sweep runs it alone).
step "bench-gdn-sweep" "$here/bin/decode-bench"

# The Python package (needs python3 with torch; no network): the wheel
# installed into a scratch folder, its tests on torch tensors (GPU tests
# fail rather than skip: KDA_REQUIRE_GPU), and KdaSplit timed against fla
# in CUDA graphs (fla's rows only where fla is installed).
if python3 -c "import torch, pytest" >/dev/null 2>&1; then
    pydir="${TMPDIR:-/tmp}/kda-python-site"
    rm -rf "$pydir"
    step "python-install" python3 -m pip install --no-deps --no-index --target "$pydir" "$here"/python/kda-*.whl
    if compgen -G "$here/python/wheels/*.whl" >/dev/null; then
        step "python-install-fla" python3 -m pip install --no-deps --no-index --target "$pydir" "$here"/python/wheels/*.whl
    fi
    step "python-tests" env PYTHONPATH="$pydir" python3 -m pytest -q -rs -p no:cacheprovider "$here/python/tests"
    # The acceptance route of docs/python.md: a fresh virtual environment,
    # the wheel pip-installed, the docs' examples (python/venv-docs.sh).
    step "python-venv-docs" bash "$here/python/venv-docs.sh" "${TMPDIR:-/tmp}/kda-python-venv" "$here/python"
    step "python-bench" env PYTHONPATH="$pydir" python3 "$here/python/bench/bench_kda.py" ${KDA_PY_BENCH_ARGS:-}
    # Issue 33: one launch of each decode kernel, kda's and fla's, at B 128
    # and 512 under Nsight Compute (bench/ncu_decode.py; the report is kept
    # as $out/ncu-decode.ncu-rep, the details page is the step's log).
    ncu=$(command -v ncu || true)
    if [[ -z $ncu && -x /usr/local/cuda/bin/ncu ]]; then ncu=/usr/local/cuda/bin/ncu; fi
    if [[ -n $ncu ]]; then
        step "python-ncu-decode" env PYTHONPATH="$pydir" "$ncu" --nvtx --nvtx-include "ncu/" \
            --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
            --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
            -f -o "$out/ncu-decode" --print-summary none \
            python3 "$here/python/bench/ncu_decode.py" ${KDA_NCU_ARGS:-}
        step "python-ncu-decode-details" "$ncu" --import "$out/ncu-decode.ncu-rep" --page details --csv
    fi
    # The template (a kernel crate outside the workspace, on kda-bind): its
    # simulator and GPU tests, fla compared and timed, torch.compile.
    step "template-install" python3 -m pip install --no-deps --no-index --target "$pydir" "$here"/template/hgrn2_decode-*.whl
    step "template-tests" env PYTHONPATH="$pydir" python3 -m pytest -q -s -rs -p no:cacheprovider "$here/template/tests"
else
    echo "== python"
    record "python" "skipped (python3 with torch and pytest not found)"
fi

printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $status
RUN
chmod +x "$stage/run.sh"

mib=$(du -sm "$stage" | cut -f1)
if ((mib >= max_mib)); then
    echo "error: .stage is ${mib} MiB, over the ${max_mib} MiB limit" >&2
    exit 1
fi
echo
echo "staged $(ls "$stage/tests" | wc -l) GPU test binaries and $(ls "$stage/bench" | wc -l) bench binaries in .stage/ (${mib} MiB)"
echo "on a GPU machine, from the workspace root (or with any copy of .stage/):"
echo
echo "    bash .stage/run.sh gpu-logs"
