# The start of every example's run.sh, sourced once it has set $here (its folder) and
# $name: the repository, the scratch folder (DEMO_DIR overrides it), the Python to use,
# the toolkit on PATH, the store, and how the examples print what they do.
root=$(cd -- "$here/../.." && pwd)
dir=${DEMO_DIR:-$PWD/demo-run/$name}
python=${DATAFLOW_PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=python3
export PATH="$root/bin:$PATH" DATAFLOW_DB="$dir/dataflow.db"
export SPARK_LOCAL_IP=${SPARK_LOCAL_IP:-127.0.0.1} # a laptop demo needs no network
# what the examples' job rows may use on this host beyond the defaults (docs/policy.md)
export DATAFLOW_POLICY="$root/examples/policy.toml"

say() { printf '\n== %s\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }
