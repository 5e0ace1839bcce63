#!/usr/bin/env bash
# Provision `ptxas` for the sm_90a assembly tests (kda-ir/tests/ptx_*.rs).
#
# The tests look for ptxas in $KDA_PTXAS, then <workspace>/.tools/ptxas/bin/ptxas,
# then PATH. This script does nothing when one of those is a ptxas of CUDA 12.8
# or later (sm_90a with st.async); otherwise it installs the pinned
# `nvidia-cuda-nvcc-cu12` wheel, which ships ptxas, into .tools/pip (git-ignored)
# and links its binary to .tools/ptxas/bin/ptxas. Idempotent; fails loudly.
set -euo pipefail

VERSION="12.9.86"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"
dest="$tools/ptxas/bin/ptxas"

# A usable ptxas: runs and is CUDA >= 12.8.
usable() {
    local v
    v="$("$1" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')" || return 1
    [[ -n "$v" ]] || return 1
    set -- $v
    (( $1 > 12 || ($1 == 12 && $2 >= 8) ))
}

for candidate in "${KDA_PTXAS:-}" "$dest" "$(command -v ptxas || true)"; do
    if [[ -n "$candidate" && -x "$candidate" ]] && usable "$candidate"; then
        echo "ptxas found: $candidate ($("$candidate" --version | tail -n 1))"
        exit 0
    fi
done

if python3 -m pip --version >/dev/null 2>&1; then
    pip_cmd=(python3 -m pip)
elif command -v pip3 >/dev/null 2>&1; then
    pip_cmd=(pip3)
else
    echo "error: no ptxas (CUDA >= 12.8) and no pip to install nvidia-cuda-nvcc-cu12" >&2
    echo "       install python3-pip, or set KDA_PTXAS to a ptxas binary" >&2
    exit 1
fi

echo "installing nvidia-cuda-nvcc-cu12==$VERSION into $tools/pip"
mkdir -p "$tools/pip" "$tools/ptxas/bin"
if ! "${pip_cmd[@]}" install --quiet --no-deps --upgrade --target "$tools/pip" \
        "nvidia-cuda-nvcc-cu12==$VERSION"; then
    echo "error: pip could not install nvidia-cuda-nvcc-cu12==$VERSION" >&2
    echo "       (offline? set KDA_PTXAS to a ptxas, or KDA_SKIP_PTXAS=1 to skip assembly)" >&2
    exit 1
fi

src="$tools/pip/nvidia/cuda_nvcc/bin/ptxas"
if [[ ! -f "$src" ]]; then
    echo "error: the wheel has no nvidia/cuda_nvcc/bin/ptxas" >&2
    exit 1
fi
chmod +x "$src"
# Relative, so the workspace can move.
ln -sfn "../../pip/nvidia/cuda_nvcc/bin/ptxas" "$dest"
if ! usable "$dest"; then
    echo "error: $dest does not run" >&2
    exit 1
fi
echo "ptxas provisioned: $dest ($("$dest" --version | tail -n 1))"
