#!/usr/bin/env bash
# Example (e): a pipeline as code. Its project (./sales: dataflow.toml, a job, its test)
# lives in a git repository; releases are deployed with `utility deploy`, which fetches a
# tag, runs the project's test, applies it to the store and switches srv/current, the
# folder cron runs. A reviewed change (retries 2 -> 5) is planned, deployed, rolled back.
# Usage: examples/project/run.sh   (DEMO_DIR overrides the scratch folder)
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
name=project
. "$here/../common.sh"
rm -rf -- "$dir" && mkdir -p -- "$dir" && cd -- "$dir"
git() { command git -c user.name=etl -c user.email=etl@example.com -c init.defaultBranch=main "$@"; }

say "The project in a git repository (a bare one here, as a server would hold it), tagged v1"
git init -q --bare origin.git
git init -q work && cp -R "$here/sales/." work/
git -C work add . && git -C work commit -q -m "sales: daily totals" && git -C work tag v1
git -C work push -q "$dir/origin.git" HEAD:refs/heads/main --tags
show utility.sh createtables

say "Deploy v1: fetched into srv/releases/<commit>, tested, applied, made srv/current"
show utility.sh deploy "$dir/origin.git" --ref v1 --into srv
for day in 2025-11-01 2025-11-02; do
  mkdir -p "data/orders_raw/dataid=$day"
  printf 'order,amount\n1,10.00\n2,%s\n' "${day: -1}5.50" > "data/orders_raw/dataid=$day/orders.csv"
done
show utility.sh ready orders_raw 2025-11-01 2025-11-02

say "Cron's line runs the current release"
show RunJob --all srv/current/jobs

say "A reviewed change: retries 2 -> 5, tagged v2; plan says what it changes (exit 2)"
sed -i 's/^retries = 2$/retries = 5/' work/dataflow.toml
git -C work commit -q -am "sales: more retries" && git -C work tag v2
git -C work push -q "$dir/origin.git" HEAD:refs/heads/main --tags
show utility.sh plan work || echo "(exit $?: changes to apply)"
show utility.sh deploy "$dir/origin.git" --ref v2 --into srv
show utility.sh deploys

say "Roll back to v1: applied again, srv/current points at it"
show utility.sh deploy --rollback --into srv
readlink srv/current
