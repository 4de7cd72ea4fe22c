#!/bin/sh
# Builds one example agent's own environment from its pins: sh examples/agents/build.sh NAME
# (from the project's root; `make agent-NAME` calls it). A Python agent gets NAME/.venv from
# NAME/requirements.txt (none: nothing to build) (every package pinned), and this project without its dependencies
# when it has a guarded variant (guarded.py); a Node agent gets NAME/node_modules from
# NAME/package-lock.json, then runs its package's build script when it has one (a TypeScript
# agent compiled to NAME/dist, every time: it is quick). A folder with both gets both: a
# Python agent beside a server from npm (its service). Nothing is reinstalled while the pins
# are older than the environment.
set -eu
name="$1"
dir="examples/agents/$name"
[ -f "$dir/agent.toml" ] || { echo "build.sh: $dir/agent.toml: no such example agent" >&2; exit 2; }
if [ -f "$dir/package-lock.json" ]; then
    stamp="$dir/node_modules/.installed"
    if ! { [ -f "$stamp" ] && [ "$stamp" -nt "$dir/package-lock.json" ]; }; then
        npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
        touch "$stamp"
    fi
    npm run build --prefix "$dir" --if-present --silent
fi
# An agent on the standard library alone (no requirements.txt) has nothing to build.
[ -f "$dir/requirements.txt" ] || exit 0
stamp="$dir/.venv/.installed"
[ -f "$stamp" ] && [ "$stamp" -nt "$dir/requirements.txt" ] && exit 0
rm -rf "$dir/.venv"
"${PYTHON:-python3}" -m venv "$dir/.venv"
pip="$dir/.venv/bin/python -m pip --quiet --disable-pip-version-check"
$pip install --upgrade pip==25.3
$pip install -r "$dir/requirements.txt"
if [ -f "$dir/guarded.py" ]; then
    $pip install --no-deps -e .
fi
touch "$stamp"
