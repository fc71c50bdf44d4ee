#!/usr/bin/env bash
# Try the latest releases that pyproject.toml's ranges allow, as a scheduled check would: build a fresh virtual
# environment without the lock, run the test suite, and report which packages moved against requirements/dev.lock
# and whether the tests pass. With --write, a passing run replaces the lock.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
VENV="$(mktemp -d)/venv"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet -e ".[dev]"
"$VENV/bin/python" -m pip freeze --exclude-editable | sort -f > "$VENV/latest.txt"
grep -v '^#' requirements/dev.lock | sort -f > "$VENV/locked.txt"
echo "== packages whose latest allowed release differs from the lock (< locked, > latest)"
diff "$VENV/locked.txt" "$VENV/latest.txt" | grep '^[<>]' || echo "(none)"
status=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider || status=$?
if [[ $status -eq 0 ]]; then
  echo "== the latest releases pass the tests"
  if [[ "${1:-}" == "--write" ]]; then
    {
      echo "# Constraints for the dev/test install: the exact versions CI and the README's test command use."
      echo "# Made by tools/check_latest.sh --write from the latest releases pyproject.toml allows, after the tests passed."
      echo "# Python 3.11, x86_64 Linux."
      cat "$VENV/latest.txt"
    } > requirements/dev.lock
    echo "== requirements/dev.lock rewritten"
  fi
else
  echo "== the latest releases FAIL the tests (exit $status): pin the package that broke in pyproject.toml"
fi
exit $status
