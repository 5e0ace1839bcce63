#!/usr/bin/env bash
# The acceptance route of docs/python.md, run by .stage/run.sh on the GPU
# machine (and by hand anywhere): a fresh virtual environment, the wheel
# pip-installed into it from a file (no network), then the docs' examples
# (tests/test_docs.py). The host interpreter's packages (torch, numpy,
# pytest) are linked into the new environment by a .pth file: that
# interpreter is often itself a virtual environment, whose packages
# `--system-site-packages` would not see.
#
#   bash python-venv-docs.sh <venv dir> <folder with kda-*.whl and tests/>
set -euo pipefail
venv="${1:?usage: python-venv-docs.sh <venv dir> <staged python folder>}"
staged="${2:?usage: python-venv-docs.sh <venv dir> <staged python folder>}"
host="${PYTHON:-python3}"
rm -rf "$venv"
"$host" -m venv "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$host" -c 'import site; print("\n".join(site.getsitepackages()))' >"$site/host-site.pth"
wheel=$(ls "$staged"/kda-*.whl)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-index --ignore-installed "$wheel"
# The installed wheel, not a copy on a path.
"$venv/bin/python" -c "import kda, sys; assert kda.__file__.startswith(sys.prefix), kda.__file__; print('kda from', kda.__file__)"
cd "$staged/tests"
"$venv/bin/python" -m pytest -v -p no:cacheprovider test_docs.py
