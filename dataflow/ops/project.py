"""A project: a folder (in git) whose file ``dataflow.toml`` declares datasets and jobs.

The file is the reviewed source of what the store holds of a pipeline (``utility plan``
shows the difference, ``utility apply`` makes the store match it)::

    [project]
    name = "sales"
    test = "python -m pytest -q tests"   # the project's checks (run by utility deploy)

    [datasets.orders]
    database = "parquet"
    schemaname = "/data/lake"
    tablename = "orders"
    username = "etl"
    password = { encrypted = "gAAAA..." }   # utility crypt -e; or { file = "/etc/etl/pw" }

    [jobs.load]
    script = "jobs/load.sh"                 # default: the one file jobs/load.*
    in = ["today"]
    out = ["orders"]
    retries = 2
    env = { region = "eu" }

A mistake is one :class:`~dataflow.errors.ProjectError` naming the file and the line.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import subprocess
from collections import namedtuple
from pathlib import Path

from .. import crypto
from ..errors import DataflowError, ProjectError
from ..run.claim.envnames import is_variable_name
from ..run.claim.settings import SETTINGS, settings_of
from ..run.process.scripts import job_name
from ..store import DATASET_COLUMNS, Row

FILE = "dataflow.toml"
DATASET_KEYS = ("hostname", "database", "schemaname", "tablename", "username", "password")
JOB_KEYS = ("script", "in", "out", "env", *SETTINGS)
NUMBERS = ("retries", "max_parallel", "timeout", "batch")

Item = tuple[str, "str | None", "str | None"]  # (itemtype, datasetid, itemvalue): a job row


class Project(namedtuple("Project", "folder file digest revision name test datasets jobs")):
    """A project as read: ``datasets`` {id: row, its password encrypted or a
    :class:`Secret`}, ``jobs`` {jobid: [items]} in the file's order, ``revision`` the git
    commit of the folder (None outside a checkout), ``test`` its check command ("")."""

    __slots__ = ()


Secret = namedtuple("Secret", "path")  # a password in a file of the host, read at apply


def read(folder: str | os.PathLike) -> Project:
    """Read and check the project in ``folder``: its file's shape, names, scripts."""
    import tomllib  # only for a project

    root = Path(folder)
    path = root / FILE
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProjectError(str(path), None, f"cannot read it: {exc.strerror}") from None
    text = raw.decode("utf-8", "replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        message = re.sub(r"\s*\(at line.*\)$", "", str(exc))
        raise ProjectError(str(path), int(found[1]) if found else None, message) from None
    where = _Where(str(path), text)
    for key in data:
        if key not in ("project", "datasets", "jobs"):
            where.fail(f"unknown table [{key}] (known: project, datasets, jobs)", key)
    header = _table(where, data.get("project", {}), "project")
    for key in header:
        if key not in ("name", "test"):
            where.fail(f"unknown key '{key}' in [project] (known: name, test)", "project", key)
    datasets = {
        name: _dataset(where, name, _table(where, body, "datasets", name))
        for name, body in _table(where, data.get("datasets", {}), "datasets").items()
    }
    jobs = {
        jobid: _job(where, root, jobid, _table(where, body, "jobs", jobid))
        for jobid, body in _table(where, data.get("jobs", {}), "jobs").items()
    }
    return Project(
        root,
        str(path),
        hashlib.sha256(raw).hexdigest(),
        _revision(root),
        _string(where, header.get("name", root.resolve().name), "project", "name"),
        _string(where, header.get("test", ""), "project", "test"),
        datasets,
        jobs,
    )


class _Where:
    """The file and its text, to name the line of a table or key in a mistake."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.lines = path, text.splitlines()

    def line(self, *keys: str) -> int | None:
        """The line of ``[a.b]`` (or of key ``c`` in it, or of an inline ``b = {...}``)."""
        if not keys:
            return None
        *tables, last = keys
        headers = [".".join(tables)] if tables else []
        whole = ".".join(keys)
        start = None
        for number, line in enumerate(self.lines, 1):
            stripped = line.strip()
            if stripped.startswith("["):  # [a . "b"] # a comment: a.b
                header = re.sub(r"\]\s*#.*$", "", stripped).strip("[] ")
                header = re.sub(r"\s*\.\s*", ".", header.replace('"', "").replace("'", ""))
                if header == whole or header.startswith(whole + "."):
                    return number  # the table, or the first of its sub-tables
                start = number if header in headers else None
            elif start is not None and re.match(rf'["\']?{re.escape(last)}["\']?\s*=', stripped):
                return number
        return self.line(*tables) if tables else None

    def fail(self, message: str, *keys: str):
        raise ProjectError(self.path, self.line(*keys), message)


def _table(where: _Where, value: object, *keys: str) -> dict:
    if not isinstance(value, dict):
        where.fail(f"[{'.'.join(keys)}] must be a table", *keys)
    return value


def _string(where: _Where, value: object, *keys: str) -> str:
    if not isinstance(value, str) or "\0" in value:
        where.fail(f"{'.'.join(keys)} must be text", *keys)
    return value


def _dataset(where: _Where, name: str, body: dict) -> Row:
    if not is_variable_name(name):
        where.fail(f"dataset name '{name}': letters, digits and _", "datasets", name)
    row: Row = {column: None for column in DATASET_COLUMNS}
    row["datasetid"] = name
    for key, value in body.items():
        if key not in DATASET_KEYS:
            known = ", ".join(DATASET_KEYS)
            where.fail(
                f"unknown key '{key}' in dataset '{name}' (known: {known})", "datasets", name, key
            )
        if key == "password":
            row["encryptedpass"] = _password(where, name, value)
        else:
            row[key] = _string(where, value, "datasets", name, key)
    return row


def _password(where: _Where, name: str, value: object):
    keys = ("datasets", name, "password")
    if isinstance(value, str):
        where.fail(
            f"dataset '{name}': a password is never in clear: password = {{ encrypted = "
            '"..." }} (utility crypt -e) or {{ file = "/path/on/the/host" }}',
            *keys,
        )
    if not isinstance(value, dict) or len(value) != 1 or not {"encrypted", "file"} & set(value):
        where.fail(
            f"dataset '{name}': password must be {{ encrypted = ... }} or {{ file = ... }}", *keys
        )
    ((kind, given),) = value.items()
    given = _string(where, given, *keys)
    if kind == "file":
        if not os.path.isabs(given):
            where.fail(f"dataset '{name}': the password file must be an absolute path", *keys)
        return Secret(given)
    if not crypto.is_token(given):
        where.fail(
            f"dataset '{name}': encrypted = ... takes a token of utility crypt -e, not a "
            "password in clear",
            *keys,
        )
    return given


def _job(where: _Where, root: Path, jobid: str, body: dict) -> list[Item]:
    keys = ("jobs", jobid)
    if (
        not jobid
        or "/" in jobid
        or jobid.startswith(".")
        or jobid == "*"
        or not jobid.isprintable()
    ):
        where.fail(f"job name '{jobid}' cannot be a script's name", *keys)
    for key in body:
        if key not in JOB_KEYS:
            where.fail(
                f"unknown key '{key}' in job '{jobid}' (known: {', '.join(JOB_KEYS)})", *keys, key
            )
    _script(where, root, jobid, body.get("script"))
    items: list[Item] = []
    for direction in ("in", "out"):
        names = body.get(direction, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            where.fail(
                f"job '{jobid}': {direction} must be a list of dataset names", *keys, direction
            )
        items += [(direction.upper(), name, None) for name in names]
    for setting in SETTINGS:
        if setting in body:
            items.append((setting, None, _setting(where, jobid, setting, body[setting])))
    try:
        settings_of(jobid, {t: v or "" for t, _, v in items if t in SETTINGS})
    except DataflowError as exc:
        named = re.search(r"setting (\w+)", str(exc))
        where.fail(str(exc), *keys, *([named[1]] if named else []))
    env = _table(where, body.get("env", {}), *keys, "env")
    for name in env:
        if name in (*SETTINGS, "IN", "OUT", "locked"):
            where.fail(
                f"job '{jobid}': '{name}' is a setting or a row of its own, not an env name",
                *keys,
                "env",
            )
    items += [
        (name, None, _string(where, value, *keys, "env", name)) for name, value in env.items()
    ]
    return items


def _setting(where: _Where, jobid: str, name: str, value: object) -> str:
    if name in NUMBERS and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if name == "alerts" and isinstance(value, list):
        return " ".join(_string(where, url, "jobs", jobid, name) for url in value)
    return _string(where, value, "jobs", jobid, name)


def _script(where: _Where, root: Path, jobid: str, given: object) -> Path:
    """The job's script: ``script``, or the one file ``jobs/<jobid>.*``; RunJob infers
    the job from the script's name, so that name must be the job's."""
    keys = ("jobs", jobid, "script") if given is not None else ("jobs", jobid)
    if given is None:
        found = [
            path
            for path in sorted((root / "jobs").glob(f"{glob.escape(jobid)}.*"))
            if job_name(str(path)) == jobid and path.is_file()
        ]
        if len(found) != 1:
            where.fail(
                f"job '{jobid}': no script: add script = \"jobs/{jobid}.sh\" (or .py)", *keys
            )
        given = str(found[0].relative_to(root))
    path = root / _string(where, given, *keys)
    inside = path.resolve().is_relative_to(root.resolve()) and not os.path.isabs(str(given))
    if not inside or not path.is_file():  # symlinks resolved: cron runs the project's own
        where.fail(f"job '{jobid}': its script {given} is not a file of the project", *keys)
    if job_name(str(path)) != jobid:
        where.fail(f"job '{jobid}': RunJob runs {given} as job '{job_name(str(path))}'", *keys)
    return path


def _revision(root: Path) -> str | None:
    """The git commit of the folder when it is a clean or dirty checkout, else None."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def secret_text(datasetid: str, secret: Secret, passkey: str | None) -> str:
    """A password kept in a file of the host (to encrypt: the passkey is needed)."""
    if passkey is None:
        raise DataflowError(
            f"dataset '{datasetid}': a password file needs the passkey (PASSKEY or PASSKEY_FILE)"
        )
    try:
        with open(secret.path, encoding="utf-8") as file:
            return file.read(65536).rstrip("\n")
    except OSError as exc:
        raise DataflowError(
            f"dataset '{datasetid}': cannot read {secret.path}: {exc.strerror}"
        ) from None


def line_of(project: Project, *keys: str) -> int | None:
    """The line of the project's file where ``[a.b]`` (or key ``c`` in it) stands."""
    with open(project.file, encoding="utf-8", errors="replace") as file:
        return _Where(project.file, file.read()).line(*keys)


def dump(datasets: dict[str, Row], job_rows: list[Row], name: str = "exported") -> str:
    """A project file holding these datasets and jobs (``utility export --project``):
    applied, it makes a store hold exactly them; passwords as their encrypted tokens."""
    lines = [
        "# written by utility export --project: datasets and jobs of a store",
        "",
        "[project]",
        f"name = {_quoted(name)}",
    ]
    for datasetid, row in sorted(datasets.items()):
        lines += ["", f"[datasets.{_key(datasetid)}]"]
        lines += [
            f"{c} = {_quoted(str(row[c]))}" for c in DATASET_KEYS[:-1] if row.get(c) is not None
        ]
        if row.get("encryptedpass"):
            lines.append(f"password = {{ encrypted = {_quoted(str(row['encryptedpass']))} }}")
    jobs: dict[str, list[Row]] = {}
    for row in job_rows:
        jobs.setdefault(str(row["jobid"]), []).append(row)
    for jobid, rows in sorted(jobs.items()):
        if jobid == "*":
            continue
        lines += ["", f"[jobs.{_key(jobid)}]"]
        for direction in ("IN", "OUT"):
            names = [_quoted(str(r["datasetid"])) for r in rows if r["itemtype"] == direction]
            lines.append(f"{direction.lower()} = [{', '.join(names)}]")
        env = []
        for row in rows:
            itemtype, value = (
                str(row["itemtype"]),
                "" if row["itemvalue"] is None else str(row["itemvalue"]),
            )
            if itemtype in SETTINGS:
                shown = (
                    value
                    if itemtype in NUMBERS and re.fullmatch(r"[1-9][0-9]{0,8}|0", value)
                    else _quoted(value)
                )
                lines.append(f"{itemtype} = {shown}")
            elif itemtype not in ("IN", "OUT"):
                env.append(f"{_key(itemtype)} = {_quoted(value)}")
        if env:
            lines.append(f"env = {{ {', '.join(env)} }}")
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL too must be escaped)."""
    import json

    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _quoted(name)
