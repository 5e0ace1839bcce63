#!/usr/bin/env bash
# The Python package's step of the test command: a virtual environment in
# .venv-py/ (git-ignored, reused), the pinned build and test tools, the abi3
# wheel built by maturin into target/wheels/ (cargo's target dir, so the
# workspace's release build is reused), installed, then pytest over
# kda-python/tests (the GPU tests skip without torch and a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-py
python=${PYTHON:-python3}
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
py="$venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check \
    maturin==1.16.0 numpy==2.2.6 pytest==8.3.5 hypothesis==6.122.3

rm -f target/wheels/kda-*.whl
"$py" -m maturin build --release --locked --quiet -m kda-python/Cargo.toml --out target/wheels
wheel=$(ls target/wheels/kda-*.whl)
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$wheel"
echo "installed $(basename "$wheel")"

# Run from the tests folder so `import kda` is the installed wheel.
cd kda-python/tests
"../../$venv/bin/python" -m pytest -q -p no:cacheprovider .
