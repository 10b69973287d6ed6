"""Spark on a cluster: where a ``.py`` job's driver runs, what spark-submit says about the
application it started, and the commands that ask for its state or kill it.

Pure functions of arguments and output lines; running them is :mod:`.sparkrun`'s. The
lines parsed are spark-submit's own log lines (log4j, INFO, on stderr):

- standalone, client mode: ``StandaloneSchedulerBackend: Connected to Spark cluster
  with app ID app-20261123190115-0000``;
- YARN: ``Client: Submitting application application_1700000000000_0042 to
  ResourceManager``, then ``Application report for application_... (state: RUNNING)``
  and at the end ``final status: SUCCEEDED``; ``yarn application -status`` prints
  ``State : FINISHED`` and ``Final-State : SUCCEEDED``;
- Kubernetes: ``Deployed Spark application NAME with application ID spark-... and
  submission ID NAMESPACE:POD into Kubernetes``, and at the end the driver container's
  ``exit code: N`` (spark-submit itself exits 0 whatever the driver's code was);
  ``spark-submit --status`` prints the pod's ``phase: Succeeded``.
"""

from __future__ import annotations

import glob
import os
import re
from collections import namedtuple
from collections.abc import Mapping, Sequence

from ...policy import spark_options

STANDALONE, YARN, KUBERNETES, LOCAL = "standalone", "yarn", "kubernetes", "local"
# spark-submit in cluster mode waits for the driver's end unless these are false (both
# default to true; standalone's spark.standalone.submit.waitAppCompletion defaults to
# false, but a standalone master cannot run a Python driver in cluster mode at all)
WAIT_CONF = {
    YARN: "spark.yarn.submit.waitAppCompletion",
    KUBERNETES: "spark.kubernetes.submission.waitAppCompletion",
}
# where a cluster-mode driver finds the chunk's variables (the machine's environment
# stays on this host)
DRIVER_ENV_CONF = {YARN: "spark.yarn.appMasterEnv.", KUBERNETES: "spark.kubernetes.driverEnv."}


class Submission(
    namedtuple("Submission", "manager master cluster wait submit confs script_at", defaults=(0,))
):
    """Where a ``.py`` job's driver runs.

    manager: STANDALONE, YARN, KUBERNETES or LOCAL; master: the ``--master`` value;
    cluster: ``--deploy-mode cluster`` (the driver runs on the cluster, not here);
    wait: spark-submit waits for the application's end (in cluster mode; client mode
    always does); submit: the spark-submit to use for ``--status`` and ``--kill``;
    confs: the user's ``--conf`` arguments (credentials and namespace for those
    commands); script_at: the index of the script in the job's argv.
    """

    __slots__ = ()

    @property
    def tracked(self) -> bool:
        """Does RunJob follow an application on the cluster (kill it, poll it)?"""
        return self.cluster and self.manager in (YARN, KUBERNETES)


def manager_of(master: str | None) -> str:
    if master is None or master.startswith("local"):
        return LOCAL
    if master.startswith("spark://"):
        return STANDALONE
    if master.startswith("k8s://"):
        return KUBERNETES
    if master == "yarn":
        return YARN
    return master  # a plug-in cluster manager: run as is, not followed


def _pairs(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """``args`` as spark-submit reads them, (option, value) pairs: the reading the host's
    policy checks (``--name --deploy-mode=cluster`` is a name, not a deploy mode)."""
    try:
        return spark_options(list(args), lenient=True)
    except ValueError:  # an option without its value: refused before (sparksubmit)
        return []


def option(args: Sequence[str], name: str) -> str | None:
    """The last value given to ``name`` (``--master yarn`` or ``--master=yarn``)."""
    values = [value for option, value in _pairs(args) if option == name]
    return values[-1] if values else None


def conf_args(args: Sequence[str]) -> list[str]:
    """The ``--conf key=value`` pairs of ``args``, as ``["--conf", "key=value", ...]``."""
    found = [value for option, value in _pairs(args) if option in ("--conf", "-c") and value]
    return [word for pair in found for word in ("--conf", pair)]


def conf(args: Sequence[str], key: str) -> str | None:
    """The last value of Spark property ``key`` set with ``--conf`` in ``args``."""
    value = None
    for pair in conf_args(args)[1::2]:
        name, equals, text = pair.partition("=")
        if equals and name == key:
            value = text.strip()
    return value


def describe(extra: Sequence[str], submit: str, script_at: int = 0) -> Submission:
    """The submission that spark-submit options ``extra`` make (the last one given wins,
    as for spark-submit)."""
    master = option(extra, "--master") or conf(extra, "spark.master")
    mode = option(extra, "--deploy-mode") or conf(extra, "spark.submit.deployMode") or "client"
    manager = manager_of(master)
    cluster = mode.strip().lower() == "cluster"
    wait = manager not in WAIT_CONF or (conf(extra, WAIT_CONF[manager]) or "").lower() != "false"
    return Submission(manager, master or "", cluster, wait, submit, conf_args(extra), script_at)


def driver_env_args(submission: Submission, variables: dict[str, str]) -> list[str]:
    """``--conf`` arguments that give a cluster-mode driver the chunk's variables."""
    prefix = DRIVER_ENV_CONF.get(submission.manager) if submission.cluster else None
    if prefix is None:
        return []
    return [w for name, value in variables.items() for w in ("--conf", f"{prefix}{name}={value}")]


LOG4J_ENV = "LOG4J_CONFIGURATION_FILE"  # log4j2's own variable for its configuration file


def log_env(submission: Submission, environ: Mapping[str, str]) -> dict[str, str]:
    """The driver's log4j2 configuration, for a driver here on a standalone cluster.

    ``spark.log.level=WARN`` (see sparksubmit) hides the INFO line that names the
    application; this configuration is WARN but for that line. Not given when the user
    configured log4j2 themselves (the variable, ``SPARK_SUBMIT_OPTS``, or a ``log4j2.*``
    file in Spark's conf folder): theirs rules, and the history may lack the id.
    """
    if submission.manager != STANDALONE or submission.cluster or LOG4J_ENV in environ:
        return {}
    if "log4j" in environ.get("SPARK_SUBMIT_OPTS", ""):
        return {}
    home = environ.get("SPARK_HOME")
    conf_dir = environ.get("SPARK_CONF_DIR") or (home and os.path.join(home, "conf"))
    if conf_dir and glob.glob(os.path.join(glob.escape(conf_dir), "log4j2*")):
        return {}
    return {LOG4J_ENV: os.path.join(os.path.dirname(__file__), "spark-log4j2.properties")}


# -- what spark-submit says ------------------------------------------------------------------

_STANDALONE_APP = re.compile(r"Connected to Spark cluster with app ID (app-[0-9]+-[0-9]+)")
_YARN_APP = re.compile(
    r"(?:Submitting application|Submitted application|Application ID is assigned:?"
    r"|Application report for) (application_[0-9]+_[0-9]+)\b"
)
_YARN_FINAL_LINE = re.compile(r"^\s*final status: (\w+)")
_K8S_SUBMISSION = re.compile(r"submission ID (\S+:\S+?) into Kubernetes")
_K8S_EXIT = re.compile(r"^\s*exit code: (-?[0-9]+)\s*$")
_K8S_PHASE = re.compile(r"^\s*phase: (\w+)\s*$")
_YARN_FINAL = re.compile(r"^\s*Final-State\s*:\s*(\w+)")
_YARN_STATE = re.compile(r"^\s*State\s*:\s*(\w+)")
_YARN_REPORT = re.compile(r"Application report for application_[0-9_]+ \(state: (\w+)\)")


class Watch:
    """Reads spark-submit's output line by line for the application's id and state."""

    def __init__(self, submission: Submission):
        self.submission = submission
        self.app_id: str | None = None  # what --kill / --status / yarn take
        self.exit_code: int | None = None  # Kubernetes: the driver container's
        self.state: str | None = None  # the last state reported

    def line(self, text: str) -> None:
        manager = self.submission.manager
        if manager == STANDALONE:
            found = _STANDALONE_APP.search(text)
            if found and self.app_id is None:
                self.app_id = found.group(1)
        elif manager == YARN:
            found = _YARN_APP.search(text)
            if found and self.app_id is None:
                self.app_id = found.group(1)
            report = _YARN_REPORT.search(text) or _YARN_FINAL_LINE.search(text)
            if report and report.group(1) != "UNDEFINED":
                self.state = report.group(1)
        elif manager == KUBERNETES:
            found = _K8S_SUBMISSION.search(text)
            if found and self.app_id is None:
                self.app_id = found.group(1)
            code = _K8S_EXIT.search(text)
            if code:
                self.exit_code = int(code.group(1))
            phase = _K8S_PHASE.search(text)
            if phase:
                self.state = phase.group(1)

    def note(self) -> str | None:
        """For the run's history: which application it was, and its last state."""
        if self.app_id is None:
            return None
        what = {
            STANDALONE: "spark application",
            YARN: "yarn application",
            KUBERNETES: "kubernetes submission",
        }.get(self.submission.manager, "application")
        return f"{what} {self.app_id}" + (f" ({self.state})" if self.state else "")


class Status(namedtuple("Status", "done ok state exit_code")):
    """One answer to a status request: has the application ended, did it succeed."""

    __slots__ = ()


_YARN_DONE = {"FINISHED", "FAILED", "KILLED"}
_K8S_DONE = {"Succeeded", "Failed"}


def parse_status(submission: Submission, output: str) -> Status | None:
    """The state in the output of :func:`status_argv`'s command; None if it says none."""
    lines = output.splitlines()
    if submission.manager == YARN:
        state = final = None
        for text in lines:
            found = _YARN_FINAL.search(text)
            if found:
                final = found.group(1)
            elif _YARN_STATE.search(text):
                state = _YARN_STATE.search(text).group(1)  # type: ignore[union-attr]
        if state is None:
            return None
        done = state in _YARN_DONE
        label = final if done and final else state
        return Status(done, done and state == "FINISHED" and final == "SUCCEEDED", label, None)
    if submission.manager == KUBERNETES:
        phase, code = None, None
        for text in lines:
            if _K8S_PHASE.search(text):
                phase = _K8S_PHASE.search(text).group(1)  # type: ignore[union-attr]
            if _K8S_EXIT.search(text):
                code = int(_K8S_EXIT.search(text).group(1))  # type: ignore[union-attr]
        if phase is None:
            return None
        done = phase in _K8S_DONE
        ok = phase == "Succeeded" and not code
        return Status(done, done and ok, phase, code)
    return None


# -- commands ------------------------------------------------------------------------------


def yarn_command(environ: dict[str, str]) -> str:
    """``$HADOOP_HOME/bin/yarn`` when set, else ``yarn`` (found on PATH)."""
    home = environ.get("HADOOP_HOME") or environ.get("HADOOP_YARN_HOME")
    return f"{home}/bin/yarn" if home else "yarn"


def kill_argv(submission: Submission, app_id: str, environ: dict[str, str]) -> list[str]:
    """The command that kills the application on its cluster."""
    if submission.manager == YARN:
        return [yarn_command(environ), "application", "-kill", app_id]
    return [
        submission.submit,
        "--master",
        submission.master,
        *submission.confs,
        "--kill",
        app_id,
    ]


def status_argv(submission: Submission, app_id: str, environ: dict[str, str]) -> list[str]:
    """The command that prints the application's state."""
    if submission.manager == YARN:
        return [yarn_command(environ), "application", "-status", app_id]
    return [
        submission.submit,
        "--master",
        submission.master,
        *submission.confs,
        "--status",
        app_id,
    ]
