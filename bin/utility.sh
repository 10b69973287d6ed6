#!/bin/sh
# utility.sh: the admin CLI (see 'utility.sh --help'). A thin wrapper over
# `python -m dataflow.cli.utility`; it may be symlinked anywhere or put on PATH.
src=$0   # (POSIX sh: dash starts in a third of the time bash takes, with env before it)
[ -L "$src" ] && src=$(readlink -f -- "$src")   # a symlink: find the checkout it points into
case $src in */*) here=${src%/*} ;; *) here=. ;; esac   # no dirname process: a quicker start
if [ -z "${DATAFLOW_PYTHON:-}" ] && [ -x "$here/../.venv/bin/utility" ]; then
    exec "$here/../.venv/bin/utility" "$@"   # the installed entry point: quickest start
fi
python=${DATAFLOW_PYTHON:-$here/../.venv/bin/python}
[ -x "$python" ] || python=python3
exec "$python" -m dataflow.cli.utility "$@"
