#!/usr/bin/env bash
# utility.sh: the admin CLI (see 'utility.sh --help'). A thin wrapper over
# `python -m dataflow.cli.utility`; it may be symlinked anywhere or put on PATH.
here=$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")
if [ -z "${DATAFLOW_PYTHON:-}" ] && [ -x "$here/../.venv/bin/utility" ]; then
    exec "$here/../.venv/bin/utility" "$@"   # the installed entry point: quickest start
fi
python=${DATAFLOW_PYTHON:-$here/../.venv/bin/python}
[ -x "$python" ] || python=python3
exec "$python" -m dataflow.cli.utility "$@"
