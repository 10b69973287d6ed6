#!/usr/bin/env bash
# Example (b): a three-stage daily pipeline, extract CSV -> clean -> aggregate to Parquet,
# over four days: a bad file fails one day, the other days catch up, the redelivered day
# flows through after a RESUBMIT, and a late correction rebuilds one day, and only it.
# Usage: examples/daily_pipeline/run.sh   (DEMO_DIR overrides the scratch folder)
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
name=daily_pipeline
. "$here/../common.sh"
rm -rf -- "$dir" && mkdir -p -- "$dir/data" && cd -- "$dir"
data=$dir/data
days=(2025-11-01 2025-11-02 2025-11-03 2025-11-04)

catch_up() {  # a backfill: every waiting day of a job in one Spark driver, days batched
  printf '$ RunJob --all ./%s.py\n' "$1"
  RunJob --all "./$1.py" 2>&1 || true    # a failed day is reported, not fatal
}
drain() {  # run a job until it has nothing left to do, as cron would over a few runs
  local job=$1 log
  log=$(mktemp)
  for _ in $(seq 100); do
    printf '$ RunJob ./%s.py\n' "$job"
    RunJob "./$job.py" 2>&1 | tee "$log" || true    # a failed day is reported, not fatal
    grep -q "no suitable data available" "$log" && break
    grep -q "Launching" "$log" || { echo "RunJob could not start $job" >&2; exit 1; }
  done
  rm -f -- "$log"
}
deliver() {  # the feed drops a day's file and marks its chunk READY, as its own job would
  "$python" "$here/feed.py" "$data" "$@"
  utility.sh dml "insert into datastatus (dataid,datasetid,jobid,locktype,modified,status)
    values ('$1','landing','feed','OUT',now(),'READY')" >/dev/null
}
quiet() {  # a Spark tool run in-process, without Spark's start-up chatter; errors still show
  local err rc=0
  err=$(mktemp)
  "$@" 2>"$err" || rc=$?
  if [ "$rc" -ne 0 ]; then
    grep -v -E "^(WARNING: Using incubator|Using Spark's default|Setting default log level|To adjust logging level|[0-9]{2}/[0-9]{2}/[0-9]{2} )" "$err" >&2 || true
  fi
  rm -f -- "$err"
  return "$rc"
}
snapshot() {  # every file of the daily totals, with its modification time
  (cd "$data/daily_totals" && find . -type f -printf '%h %f %T@\n' | sort)
}

say "Register the datasets and the three jobs (store: $DATAFLOW_DB)"
show utility.sh createtables
show utility.sh dml "insert into dataset (datasetid,database,schemaname,tablename) values
  ('landing','csv','$data','landing'), ('raw','parquet','$data','raw'),
  ('clean','parquet','$data','clean'), ('daily_totals','file:','$data','daily_totals')"
# small, short jobs: one core, no UI, and a JVM that starts quicker (C1 JIT, serial GC)
spark_args="--master local[1] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false"
spark_args+=" --conf spark.sql.shuffle.partitions=1 --conf spark.log.level=WARN"
spark_args+=" --driver-java-options \"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC\""
show utility.sh dml "insert into job (jobid,itemtype,datasetid,itemvalue) values
  ('extract','IN','landing',null), ('extract','OUT','raw',null),
  ('clean','IN','raw',null), ('clean','OUT','clean',null),
  ('aggregate','IN','clean',null), ('aggregate','OUT','daily_totals',null),
  ('extract','spark_args',null,'$spark_args'), ('clean','spark_args',null,'$spark_args'),
  ('aggregate','spark_args',null,'$spark_args')"
for job in extract clean aggregate; do ln -s "$here/$job.py" .; done
show quiet utility.sh validate "$here/pipelines"

say "The feed delivers four days; the file of ${days[2]} comes in an old format"
for day in "${days[@]}"; do
  if [ "$day" = "${days[2]}" ]; then deliver "$day" --old-format; else deliver "$day"; fi
done
show ls "$data/landing"

say "Each job catches up on every day it can: ${days[2]} fails at extract, the others go through"
# many days of one job: one Spark driver, up to 20 days per query (run_batch); a batch
# with the bad file is split until that day fails alone
catch_up extract
catch_up clean
catch_up aggregate
show utility.sh runs

say "The feed redelivers ${days[2]}; one RESUBMIT and the same commands catch it up"
"$python" "$here/feed.py" "$data" "${days[2]}"
show utility.sh endjob extract "${days[2]}" RESUBMIT
drain extract
drain clean
drain aggregate

say "Late orders for ${days[1]}: resubmit its three stages to rebuild that day, only it"
before=$(snapshot)
"$python" "$here/feed.py" "$data" "${days[1]}" --late-orders
for job in extract clean aggregate; do show utility.sh endjob "$job" "${days[1]}" RESUBMIT; done
drain extract
drain clean
drain aggregate
after=$(snapshot)
for day in "${days[@]}"; do
  if [ "$(grep "dataid=$day " <<<"$before")" = "$(grep "dataid=$day " <<<"$after")" ]; then
    echo "daily_totals $day: untouched"
  else
    echo "daily_totals $day: rebuilt"
  fi
done

say "Final state"
show utility.sh sql "select jobid, dataid, status from datastatus
  where locktype = 'OUT' and jobid != 'feed' order by jobid, dataid"
show quiet "$python" "$here/report.py"
printf '\nDone. Folder: %s (store dataflow.db, data in data/)\n' "$dir"
