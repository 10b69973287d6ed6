#!/usr/bin/env bash
# Example (c): the migration of seed 001 at this machine's scale. A source table cut into
# SHARDS shards (default 200) is extracted shard by shard and loaded into a Parquet lake;
# one shard fails, the others go on, a RESUBMIT retries it, and a reconciliation proves
# that source and lake hold the same number of rows in every shard. Both jobs define
# run(spark, job), so each drain is one Spark driver that works through every shard:
# 200 shards pay three JVM start-ups, not 400.
#
# Usage: examples/migration/run.sh
#   SHARDS=200 ROWS=50       size of the source (ROWS orders per shard)
#   MIGRATION_SOURCE=auto    postgres | embedded | auto: PostgreSQL when it can be had
#   PGHOST/PGPORT/PGUSER/PGPASSWORD/PGDATABASE  use that server (else a throwaway one is
#                            started with pg_sandbox.sh, when the PostgreSQL packages are here)
#   CHAOS_SHARD=7            the shard whose first load fails
#   PARALLEL=2               shards run at once in each drain's driver (RunJob --parallel)
#   DEMO_DIR                 the scratch folder (default ./demo-run/migration)
# Exit 3 when MIGRATION_SOURCE=postgres and PostgreSQL cannot be had (the reason on stderr).
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
name=migration
. "$here/../common.sh"
shards=${SHARDS:-200} rows=${ROWS:-50} chaos=${CHAOS_SHARD:-7} kind=${MIGRATION_SOURCE:-auto}
parallel=${PARALLEL:-2}
unset CHAOS_SHARD  # only the first loads get it
jar=${POSTGRES_JDBC_JAR:-/usr/share/java/postgresql.jar}
export PASSKEY=${PASSKEY:-$("$python" -c 'import secrets; print(secrets.token_urlsafe(24))')}
rm -rf -- "$dir" && mkdir -p -- "$dir/lake" && cd -- "$dir"

drain() {  # every claimable shard of a job in one Spark driver, PARALLEL at once; a failed
  # shard is not fatal
  local job=$1
  shift  # the rest: VAR=value settings for the job's environment
  env "$@" RunJob --parallel "$parallel" "./$job.py" || echo "-- $job: some shards failed"
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

# -- the source: PostgreSQL when it can be had, else the embedded CSV files --------------
postgres_reason=""
if [ "$kind" != embedded ]; then
  if [ ! -f "$jar" ]; then
    postgres_reason="no PostgreSQL JDBC driver at $jar (apt-get install libpostgresql-jdbc-java)"
  elif [ -z "${PGHOST:-}" ]; then
    if sandbox=$("$here/pg_sandbox.sh" start 2>"$dir/sandbox.err"); then
      trap '"$here/pg_sandbox.sh" stop "$sandbox"' EXIT
      set -a; . "$sandbox/env"; set +a
    else
      postgres_reason=$(cat "$dir/sandbox.err")
    fi
  fi
fi
if [ "$kind" = postgres ] && [ -n "$postgres_reason" ]; then
  echo "$postgres_reason" >&2
  exit 3
fi
psql=${PGBIN:+$PGBIN/psql}
[ -n "$psql" ] && [ -x "$psql" ] || psql=$(command -v psql || echo psql)

say "The source: $shards shards of $rows orders"
show utility.sh createtables
if [ "$kind" != embedded ] && [ -z "$postgres_reason" ]; then
  echo "PostgreSQL at $PGHOST:$PGPORT, database $PGDATABASE, table public.orders"
  "$psql" -qX -v ON_ERROR_STOP=1 -v shards="$shards" -v rows="$rows" -f "$here/source.sql"
  # encrypted in-process: the password is never an argument of any command
  secret=$("$python" -c 'import os; from dataflow import crypto
print(crypto.encrypt(os.environ["PGPASSWORD"], os.environ["PASSKEY"]))')
  show utility.sh dml "insert into dataset values ('source_orders', '$PGHOST:$PGPORT',
    '$PGDATABASE', 'public', 'orders', '$PGUSER', '$secret')"
  extract_jars="--jars $jar"
  reconcile_jars=$jar
else
  echo "embedded CSV source in $dir/source${postgres_reason:+ (PostgreSQL: $postgres_reason)}"
  "$python" "$here/make_source.py" "$dir/source" "$shards" "$rows"
  show utility.sh dml "insert into dataset (datasetid, database, schemaname, tablename)
    values ('source_orders', 'csv', '$dir/source', 'orders')"
  extract_jars="" reconcile_jars=""
fi

say "Register the lake datasets and the two jobs; the source's shards are READY"
show utility.sh dml "insert into dataset (datasetid, database, schemaname, tablename) values
  ('landing_orders', 'parquet', '$dir/lake', 'landing/orders'),
  ('lake_orders', 'parquet', '$dir/lake', 'warehouse/orders')"
# one driver per drain: two cores, no UI, few shuffle partitions for shard-sized data
spark_args="--master local[2] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false"
spark_args+=" --conf spark.log.level=ERROR --conf spark.sql.shuffle.partitions=2"
show utility.sh dml "insert into job (jobid, itemtype, datasetid, itemvalue) values
  ('extract', 'IN', 'source_orders', null), ('extract', 'OUT', 'landing_orders', null),
  ('extract', 'source_orders_dataid_column', null, 'shard'),
  ('extract', 'spark_args', null, '$spark_args $extract_jars'),
  ('load', 'IN', 'landing_orders', null), ('load', 'OUT', 'lake_orders', null),
  ('load', 'spark_args', null, '$spark_args')"
show utility.sh dml "insert into datastatus (dataid, datasetid, jobid, locktype, modified, status)
  with recursive shard(n) as (select 1 union all select n + 1 from shard where n < $shards)
  select n, 'source_orders', 'source', 'OUT', now(), 'READY' from shard"
for job in extract load; do ln -s "$here/$job.py" .; done

say "Extract every shard, then load every shard (shard $chaos fails once)"
drain extract
drain load CHAOS_SHARD="$chaos"
say "Why shard $chaos failed: its run's log (Spark's own chatter left out)"
utility.sh log load "$chaos" | grep -E "^(extract|load):" || true
show utility.sh sql "select status, count(*) as chunks from datastatus
  where jobid = 'load' group by status"

say "Reconcile: the failed shard shows up as missing in the lake"
show quiet "$python" "$here/reconcile.py" $reconcile_jars || true

say "Retry it: RESUBMIT, and the same drain picks it up"
show utility.sh endjob load "$chaos" RESUBMIT
drain load

say "Reconcile again: every shard must match"
show quiet "$python" "$here/reconcile.py" $reconcile_jars
printf '\nDone. Folder: %s (store dataflow.db, lake in lake/)\n' "$dir"
