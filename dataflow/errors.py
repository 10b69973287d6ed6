"""The exceptions a user can cause. The CLIs print ``error: <message>`` and exit non-zero.

Messages never contain a passkey or a password.
"""

from __future__ import annotations

from collections.abc import Iterable


class DataflowError(Exception):
    """Base class: a problem the user can fix, reported as one line."""

    exit_code = 2


class StoreMissing(DataflowError):
    def __init__(self, path: str, first: str = ""):
        super().__init__(
            f"no dataflow store at {path}: {first}run 'utility createtables' to create one "
            "(or point --db / DATAFLOW_DB at an existing store)"
        )


class StoreVersion(DataflowError):
    def __init__(self, path: str, found: int, wanted: int):
        if found < wanted:
            hint = "run 'utility createtables' to upgrade it"
        else:
            hint = "it was written by a newer OpenDataFlow; upgrade this installation"
        super().__init__(f"store {path} has schema version {found}, expected {wanted}: {hint}")


class NotAStore(DataflowError):
    def __init__(self, path: str, reason: str):
        super().__init__(f"{path} is not a usable dataflow store: {reason}")


class StoreUnavailable(DataflowError):
    """The store's file cannot be read or written: disk full, I/O error, read-only.
    ``passing``: a failure that passes if tried again later (busy, a lost connection)."""

    exit_code = 3  # as a driver error that reaches the CLI

    def __init__(self, verb: str, path: object, reason: str, passing: bool = False):
        super().__init__(f"cannot {verb} the store {path}: {reason}")
        self.passing = passing


class BadSQL(DataflowError):
    def __init__(self, reason: str):
        super().__init__(f"SQL failed: {reason}")


class ReadOnlySQL(DataflowError):
    def __init__(self, refused: str | None = None) -> None:
        what = f" ({refused} is refused)" if refused else ""
        super().__init__(
            f"'utility sql' is read-only{what}; use 'utility dml' or 'utility ddl' for changes"
        )


class UnknownJob(DataflowError):
    """A job name that is not registered; ``known``: the registered names, for a guess."""

    def __init__(self, jobid: str, known: Iterable[str] = ()):
        import difflib  # only for the guess: not on every RunJob's start

        close = difflib.get_close_matches(jobid, list(known), n=3)
        guess = " or ".join(f"'{name}'" for name in close)
        hint = f"did you mean {guess}? " if close else "it has no rows in table job "
        super().__init__(f"unknown job '{jobid}': {hint}(see 'utility jobs')")


class JobConfigError(DataflowError):
    """A job's registration cannot work (no OUT dataset, bad variable name, ...)."""

    def __init__(self, jobid: str, reason: str):
        super().__init__(f"job '{jobid}' is misconfigured: {reason}")


class UnknownChunk(DataflowError):
    def __init__(self, jobid: str, dataid: str):
        super().__init__(f"job '{jobid}' has no chunk with dataid '{dataid}' (see 'utility runs')")


class BadStatus(DataflowError):
    def __init__(self, status: str, allowed: tuple[str, ...]):
        super().__init__(f"status must be one of {', '.join(allowed)}, not '{status}'")


class ScriptError(DataflowError):
    def __init__(self, script: str, reason: str, errno: int | None = None):
        super().__init__(f"cannot run {script}: {reason}")
        self.errno = errno  # the system's, when starting it failed


class RunSetupError(DataflowError):
    def __init__(self, what: str, path: str, reason: str):
        super().__init__(f"cannot prepare the {what} {path}: {reason}; nothing was claimed")


class PasskeyMissing(DataflowError):
    def __init__(self, what: str):
        super().__init__(
            f"{what} needs the passkey: set PASSKEY, or PASSKEY_FILE to a file holding it"
        )


class WrongPasskey(DataflowError):
    def __init__(self, what: str = "the text"):
        super().__init__(f"cannot decrypt {what}: wrong passkey or damaged ciphertext")


class UsageError(DataflowError):
    """Bad command-line usage that argparse could not catch."""


class NetworkFilesystem(DataflowError):
    def __init__(self, folder: str, kind: str):
        super().__init__(
            f"{folder} is on a {kind} file system: the store and its locks need a local disk "
            "(SQLite's WAL and file locks do not work across a network); use --db on a local path"
        )


class ChunkBusy(DataflowError):
    def __init__(self, jobid: str, dataid: str, status: str):
        if "HOLD" in status:
            import shlex

            what = (
                f"on hold: release it first ({shlex.join(['utility', 'release', jobid, dataid])})"
            )
        else:
            what = f"{status}: wait for it to end before changing it"
        super().__init__(f"{jobid} {dataid} is {what}")


class StoreLinked(DataflowError):
    def __init__(self, path: str, links: int):
        super().__init__(
            f"store {path} has {links} hard links: its chunk locks are kept beside one of its "
            "names, so two names could run a live chunk twice; keep one name (a symlink is fine)"
        )


class ChunkLive(DataflowError):
    def __init__(self, jobid: str, dataid: str, where: str):
        super().__init__(
            f"{jobid} {dataid} is being run now ({where}): wait for it to end, or add --force "
            "if you know that run is lost"
        )


class UnknownDataset(DataflowError):
    """A dataset name that is not registered; ``register``: the unknown names of a job
    being registered, given with the command lines that register them."""

    def __init__(self, datasetid: str, register: Iterable[str] = ()):
        self.datasetid = datasetid
        names = list(register)
        if len(names) > 1:
            listed = ", ".join(f"'{name}'" for name in names)
            message = f"unknown datasets {listed} (see 'utility datasets'); register them first: "
        else:
            message = f"unknown dataset '{datasetid}' (see 'utility datasets')"
            message += "; register it first: " if names else ""
        import shlex  # (its import of re is not a run's to pay)

        message += " && ".join(shlex.join(["utility", "register-dataset", n]) for n in names)
        super().__init__(message)


class RegistrationError(DataflowError):
    """A registration that would break the store's rules; nothing was changed."""


# -- Spark: spark-submit, the job-side API, pipelines and their tests ------------------------


class SparkUnavailable(DataflowError):
    """spark-submit or Java cannot be found; raised before any chunk is claimed."""

    def __init__(self, script: str, reason: str):
        super().__init__(f"cannot run {script} through spark-submit: {reason}")


class SparkConnectUnavailable(DataflowError):
    """A job's Spark Connect server is not usable; raised before any chunk is claimed."""

    def __init__(self, script: str, reason: str):
        super().__init__(f"cannot run {script} as a Spark Connect client: {reason}")


class EntryPointError(DataflowError):
    """A job script with an entry point cannot be imported, or has no ``run(spark, job)``."""

    def __init__(self, script: str, why: str):
        super().__init__(f"cannot call run(spark, job) of {script}: {why}")


class DriverFailed(DataflowError):
    """The one Spark driver of a drain ended without draining (chunks it was running are
    recovered as any dead run's)."""

    def __init__(
        self, jobid: str, why: str, log: object, claimed: bool = True, role: str = "Spark driver"
    ):
        super().__init__(f"the {role} of {jobid} {why}; its log: {log}")
        self.exit_code = 1 if claimed else 2  # 2: nothing claimed, as a configuration error


class WorkerFailed(DataflowError):
    """A worker of a drain spread over processes could not go on: what it said (the
    store failed...), or how it ended (killed); the others drained on meanwhile."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class BadSparkArgs(DataflowError):
    def __init__(self, source: str, reason: str):
        super().__init__(f"cannot split {source} into spark-submit arguments: {reason}")


class NotAJobEnvironment(DataflowError):
    def __init__(self, missing: str):
        super().__init__(
            f"no dataflow job environment (${missing} is not set): run this script with "
            "RunJob, or build a JobContext by hand for a test"
        )


class NoSuchJobDataset(DataflowError):
    def __init__(self, jobid: str, direction: str, name: str | None, known: list[str]):
        what = f"{direction} dataset '{name}'" if name else f"exactly one {direction} dataset"
        have = ", ".join(known) if known else "none"
        super().__init__(f"job '{jobid}' has no {what} (its {direction} datasets: {have})")


class DatasetError(DataflowError):
    """A dataset's metadata cannot be mapped to a Spark source or sink."""

    def __init__(self, datasetid: str, reason: str):
        super().__init__(f"dataset '{datasetid}': {reason}")


class ChunkMissing(DataflowError):
    def __init__(self, datasetid: str, dataid: str, where: str):
        super().__init__(f"dataset '{datasetid}' has no chunk '{dataid}' at {where}")


class PipelineError(DataflowError):
    def __init__(self, where: str, reason: str):
        super().__init__(f"pipeline {where}: {reason}")


class TransformationMismatch(DataflowError, AssertionError):
    """A transformation's output differs from the expected rows (the message is the diff)."""


class VacuousTest(DataflowError, AssertionError):
    """A transformation test whose input already equals its expected output proves nothing."""


class RunFenced(DataflowError):
    """A run's result came after its chunk was taken from it: recovered as dead (its host
    was cut off from the store for longer than the liveness bound) or ended by hand."""

    def __init__(self, jobid: str, dataid: str, status: str):
        super().__init__(
            f"the run of {jobid} at {dataid} was ended elsewhere while it ran (recovered as "
            f"abandoned, or ended by hand); its result {status} is not recorded"
        )


class StreamError(DataflowError):
    """A stream (``utility stream``, ``dataflow.spark.stream``) cannot start."""

    def __init__(self, jobid: str, reason: str):
        super().__init__(f"cannot stream job '{jobid}': {reason}")


class DropError(DataflowError):
    """``utility drop``: an item cannot go into a landing folder."""

    def __init__(self, datasetid: str, reason: str):
        super().__init__(f"cannot drop into '{datasetid}': {reason}")


class ServeError(DataflowError):
    """``utility serve`` cannot start: its extra is missing, a bad token file or address."""


class Refused(DataflowError):
    """A request ``utility serve`` refuses (items that cannot land: nothing of the
    request landed). ``status`` is the HTTP status the server answers with."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status


class StoreMoved(DataflowError):
    """A store that ``copy-store --retire`` retired: it refuses the work of the one it
    moved to, so that a cron line left on it cannot run a chunk a second time."""

    def __init__(self, target: str, on: str):
        super().__init__(
            f"this store moved to {target} (copy-store --retire on {on}); use --db {target}"
        )


class PolicyError(DataflowError):
    """The host's policy file (``dataflow.policy``) cannot be read or is malformed."""


class ProjectError(DataflowError):
    """A project's file (``dataflow.toml``) that cannot be applied: named by file and line."""

    def __init__(self, path: str, line: int | None, reason: str):
        super().__init__(f"{path}{f':{line}' if line else ''}: {reason}")


class SealBroken(DataflowError):
    """A password sealed to a dataset's address that does not open for it."""

    def __init__(self, what: str, reason: str):
        super().__init__(f"{what} does not open: {reason}")


class DeployError(DataflowError):
    """A deploy that could not be made: nothing changed (its current release, the store)."""
