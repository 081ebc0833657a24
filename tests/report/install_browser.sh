#!/usr/bin/env bash
# Install what tests/report/test_browser.py needs: Debian's chromium + chromedriver, and selenium.
# Idempotent: skips whatever is already installed.
#
#   tests/report/install_browser.sh [PIP [CONSTRAINTS]]
#     PIP          pip executable of the test environment (default: $PIP, else "$PYTHON -m pip",
#                  else "python3 -m pip"), e.g. .venv/bin/pip
#     CONSTRAINTS  pip constraints file passed with -c (default: $CONSTRAINTS; e.g. the one
#                  pinning torch, .venv/constraints.txt)
#
# The Makefile's `browser` target calls: install_browser.sh $(BIN)/pip $(VENV)/constraints.txt
# Without root or apt-get, a missing browser is reported and the browser test skips.
set -euo pipefail

if [ -n "${1:-}" ]; then
    PIP_CMD=("$1")
elif [ -n "${PIP:-}" ]; then
    PIP_CMD=("$PIP")
else
    PIP_CMD=("${PYTHON:-python3}" -m pip)
fi
CONSTRAINTS="${2:-${CONSTRAINTS:-}}"

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/bin/$1" ]; }

if have chromium && have chromedriver; then
    echo "install_browser: chromium and chromedriver already installed"
elif [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "install_browser: installing chromium and chromium-driver with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends chromium chromium-driver fonts-dejavu-core
else
    echo "install_browser: chromium/chromedriver missing and cannot apt-get install (need root);" \
         "run: sudo apt-get install chromium chromium-driver — the browser test will skip" >&2
fi

if "${PIP_CMD[@]}" show selenium >/dev/null 2>&1; then
    echo "install_browser: selenium already installed"
else
    echo "install_browser: installing selenium"
    if [ -n "$CONSTRAINTS" ]; then
        "${PIP_CMD[@]}" install -q -c "$CONSTRAINTS" "selenium>=4.20"
    else
        "${PIP_CMD[@]}" install -q "selenium>=4.20"
    fi
fi
