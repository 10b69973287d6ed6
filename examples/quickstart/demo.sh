#!/usr/bin/env bash
# The quickstart (seed 000) end to end, typed exactly as a user would, in a scratch folder.
# Usage: examples/quickstart/demo.sh   (DEMO_DIR overrides the folder, default ./demo-run/quickstart)
# Only that folder is replaced: the other examples keep their stores in ./demo-run/<example>.
set -euo pipefail
root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${DEMO_DIR:-$PWD/demo-run/quickstart}
rm -rf -- "$dir" && mkdir -p -- "$dir" && cd -- "$dir"
ln -s "$root/bin/utility.sh" utility.sh       # the quickstart calls ./utility.sh ...
export PATH="$root/bin:$PATH"                  # ... and RunJob / utility.sh from PATH
unset DATAFLOW_DB                              # the store is ./dataflow.db, as in the quickstart

bold=; plain=
if [ -t 1 ]; then bold=$'\033[1m'; plain=$'\033[0m'; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$1" "$plain"; eval "$1"; }

echo "Running the OpenDataFlow quickstart in $dir"
step 'export PASSKEY=plugh'
step './utility.sh createtables'
step "./utility.sh dml \"insert into dataset (datasetid) values  ('bobin')\""
step "./utility.sh dml \"insert into dataset (datasetid) values  ('bobout')\""
step "./utility.sh dml \"insert into job (datasetid,itemtype,jobid) values ('bobout','OUT','loadbob')\""
step "./utility.sh dml \"insert into job (datasetid,itemtype,jobid) values ('bobin' ,'IN', 'loadbob')\""
step "./utility.sh dml \"insert into datastatus (dataid,datasetid,jobid,locktype,modified,status) values ('1.0','bobin','fakejob', 'OUT',now(),'READY')\""
step "echo 'echo \"running loadbob with dataid \$dataid partition of input  \$bobin_DATASETID\"' > loadbob.sh && chmod +x loadbob.sh"
step 'RunJob ./loadbob.sh'
step 'RunJob ./loadbob.sh     # a second time: refuses a duplicate run'
step './utility.sh runs'
step 'utility.sh sql "select * from datastatus"'
step 'utility.sh endjob loadbob 1.0 RESUBMIT   # rerun a chunk: no cleanup, no scheduler change'
step 'RunJob ./loadbob.sh'
printf '\nDone. The store is %s/dataflow.db; try: cd %s && ./utility.sh runs\n' "$dir" "$dir"
