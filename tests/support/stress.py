"""The chain that stress tests drain (test_stress on one host, test_hosts on two): three
jobs, 1,000 chunks, and the worker loop that calls RunJob until its job ran them all or
nothing ran for STALL_S seconds (a chunk is lost: it says so rather than spin)."""

from __future__ import annotations

import subprocess

CHUNKS = 1000


JOBS = {"A": ["src"], "B": ["a"], "C": ["a", "b"]}


OUTPUT = {"A": "a", "B": "b", "C": "c"}


STALL_S = 120  # no chunk of any job run for this long: one is lost, the workers give up


# A worker calls RunJob (plain, or a drain) again and again until its job has
# run every chunk: upstream jobs may still be producing when it first looks. When no
# worker has run a chunk for STALL_S seconds, a chunk is lost (never READY, or never
# offered): it says so and fails, rather than spin until the test's timeout.
LOOP = """
job=$1; shift
ran() {{ cat ran.log 2>/dev/null | grep -c "$1"; }}
seen=-1; since=$SECONDS
until [ "$(ran "^$job ")" -ge {chunks} ]; do
    out=$(RunJob "$@" ./$job.sh) || {{ echo "RunJob failed: $out"; exit 1; }}
    case $out in *"no suitable data"*) sleep 0.05;; esac
    now=$(ran '')
    if [ "$now" != "$seen" ]; then
        seen=$now; since=$SECONDS
    elif [ $((SECONDS - since)) -ge {stall} ]; then
        echo "stalled: job $job ran $(ran "^$job ") of {chunks} chunks, and no job ran" \
            "a chunk for {stall} s: a chunk is lost"
        exit 3
    fi
done
"""


def finished(procs: list[subprocess.Popen], timeout: float = 1200) -> list[str]:
    """The workers' outputs once all have ended; fails with the words of those that failed
    (a stall names the job that lost a chunk)."""
    outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    failed = [text.strip()[-2000:] for p, text in zip(procs, outputs, strict=True) if p.returncode]
    assert not failed, "\n".join(failed)
    return outputs
