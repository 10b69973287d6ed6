"""A store's address (a file path, or a server's URL), as given and as shown, how long
a host of a shared store may stop answering before it counts as dead, and the rest of the
host's ``DATAFLOW_*`` settings: each checked before a store is opened, a bad one refused
in one line (:func:`check_environment`)."""

from __future__ import annotations

import os

DEFAULT_NAME = "dataflow.db"
# A store's address: the path of an SQLite file (a str, or a Path of a caller's), or a
# postgresql:// URL (a str)
Address = str | os.PathLike
URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(address: Address) -> bool:
    """Is the address a database server's URL (not a file)?"""
    return isinstance(address, str) and address.startswith(URL_SCHEMES)


def _scheme(text: str) -> str | None:
    """The scheme of ``text`` when it starts as a URL does (a letter, then letters, digits,
    "+", "." or "-", then "://"); by hand: re's import is a tenth of a cron tick's RunJob."""
    name, found, _ = text.partition("://")
    if not found or not name.isascii() or not name[:1].isalpha():
        return None
    return name if all(c.isalnum() or c in "+.-" for c in name) else None


SQLITE_URL = "sqlite:///"  # SQLAlchemy's form: sqlite:///rel.db, sqlite:////abs/path.db


def locate(db: str | None = None) -> str:
    """The store's address: ``--db``, else ``DATAFLOW_DB``, else ``./dataflow.db``; a
    ``postgresql://user@host:port/db`` URL stays as it is; ``sqlite:///PATH`` is the
    SQLite file PATH (as SQLAlchemy reads it: ``sqlite:////abs.db`` is absolute). Any
    other ``scheme://`` is refused, never taken for a relative file name."""
    found = db or os.environ.get("DATAFLOW_DB") or DEFAULT_NAME
    if found.startswith(URL_SCHEMES):
        return found
    scheme = _scheme(found)
    if scheme:
        if not found.startswith(SQLITE_URL) or found == SQLITE_URL:
            from ..errors import UsageError

            raise UsageError(
                f"unknown store address scheme '{scheme}' in {shown(found)}: give a "
                "file path, sqlite:///PATH or a postgresql:// URL"
            )
        found = found[len(SQLITE_URL) :]
    return absolute(found)


def normal(path: str) -> str:
    """``path`` as ``str(Path(path))`` writes it: "//" and "." parts dropped, no "/" at its
    end, ".." kept (a symlink's parent is not its folder's). Paths of a run are str, as
    os.path takes them: importing pathlib would cost every start some 8% (issue 46)."""
    root = "/" if path.startswith("/") else ""
    if path.startswith("//") and not path.startswith("///"):
        root = "//"  # POSIX gives two leading slashes a meaning of their own
    return root + "/".join(part for part in path.split("/") if part not in ("", ".")) or "."


def expanded(path: str | os.PathLike) -> str:
    """``path`` with ``~`` expanded: the string of ``Path(path).expanduser()``."""
    return normal(os.path.expanduser(normal(os.fspath(path))))  # "./~" too, as pathlib


def absolute(path: str | os.PathLike) -> str:
    """``path`` with ``~`` expanded, relative to the working folder: the string of
    ``Path(path).expanduser().absolute()``."""
    found = expanded(path)
    return found if found.startswith("/") else normal(os.path.join(os.getcwd(), found))


def same_store(one: Address, other: Address) -> bool:
    """Do two addresses reach the same store: the same URL, or the same file, whatever
    symlink, relative name or hard link reached it?"""
    if is_url(one) or is_url(other):
        return str(one) == str(other)
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them does not exist (yet): where it would be
        return os.path.realpath(one) == os.path.realpath(other)


# a URL's user and password, by structure: the password runs to the last "@" of the
# authority (an unescaped "@" or "/" in it is the password's, not the host's)
_USERINFO = r"(//[^:/@\s]*):\S*@(?=[^@/\s]*(?:[/?\s\"'),]|$))"


def shown(address: Address) -> str:
    """The address for a person (or a text that holds one): a URL without its password,
    whether in its user part or a ``password=`` parameter."""
    import re

    text = re.sub(_USERINFO, r"\1:***@", str(address))
    return re.sub(r"(\bpassword=)[^&\s\"']*", r"\1***", text)


def check_url(address: str) -> None:
    """Refuse a URL whose password holds an unescaped ``@``: the driver would take part of
    the password for the host, and say it in its errors."""
    authority = address.split("//", 1)[-1].split("?", 1)[0]
    if authority.count("@") > 1 or ("@" in authority and "/" in authority.rsplit("@", 1)[0]):
        from ..errors import UsageError

        raise UsageError(
            f"the password in the store's address {shown(address)} holds '@' or '/': "
            "percent-encode them (%40 for @, %2F for /)"
        )


DIRECT_ENV = "DATAFLOW_DB_DIRECT"  # the server's own address, when the store's is a pooler's


def direct_address() -> str | None:
    """``$DATAFLOW_DB_DIRECT``: the PostgreSQL server's own address of the store, set when
    the store's address (``--db``, ``DATAFLOW_DB``) is a pooler's in transaction mode
    (PgBouncer): what needs a session of its own (a keeper's run locks and heartbeats)
    goes there, the rest through the pooler. None when not set (or empty); one that is not a
    ``postgresql://`` URL is refused."""
    found = os.environ.get(DIRECT_ENV)
    if not found:
        return None
    if not found.startswith(URL_SCHEMES):
        from ..errors import UsageError

        shown_value = shown(found[:80]).encode("unicode_escape").decode("ascii")
        raise UsageError(
            f"{DIRECT_ENV} must be the PostgreSQL server's own postgresql:// URL of the store "
            f"(the store's address being its pooler's), not '{shown_value}'"
        )
    check_url(found)
    return found


def pooled(address: Address) -> bool:
    """Is this store address a pooler's (``$DATAFLOW_DB_DIRECT`` set, naming another)?"""
    direct = direct_address()
    return direct is not None and is_url(address) and str(address) != direct


LIVENESS_ENV = "DATAFLOW_LIVENESS_TIMEOUT"
LIVENESS_S = 20.0  # the default bound: a dead host's runs are recoverable after at most this
BUSY_ENV = "DATAFLOW_BUSY_TIMEOUT"
BUSY_S = 60.0  # how long a write waits for another writer (SQLite)
HOST_ENV = "DATAFLOW_HOST"
HOLDER_IDLE_ENV = "DATAFLOW_HOLDER_IDLE"
HOLDER_IDLE_S = 10.0  # how long a host's lease holder outlives its last run and RunJob


def _number(name: str, default: float, low: float, high: float, unit: str) -> float:
    """A number from the environment; a value that is not one is refused (a silent
    default would hide the mistake until a host is taken for dead, a log fills a disk or
    an alert is given up)."""
    text = os.environ.get(name)
    if text is None or text.strip() == "":
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # nan, inf and out of range alike
        from ..errors import UsageError

        shown_value = text[:60].encode("unicode_escape").decode("ascii")
        raise UsageError(
            f"{name} must be a number of {unit} from {low:.15g} to {high:.15g}, not '{shown_value}'"
        )
    return value


def _seconds(name: str, default: float, low: float, high: float) -> float:
    return _number(name, default, low, high, "seconds")


def liveness_timeout() -> float:
    """Seconds after which a host that stopped answering counts as dead (default 20 s)."""
    return _seconds(LIVENESS_ENV, LIVENESS_S, 2, 3600)


def holder_idle() -> float:
    """Seconds a host's lease holder waits, holding no run and serving no RunJob, before
    it ends (the next RunJob starts another): RunJobs a cron starts back to back share
    it."""
    return _seconds(HOLDER_IDLE_ENV, HOLDER_IDLE_S, 0, 86_400)


def for_job(address: Address) -> str:
    """The store's address as a job gets it in ``DATAFLOW_DB``: a file's absolute path, or
    the URL without its password (the job's own connection finds it where ``psql`` does:
    ``~/.pgpass``, ``$PGPASSWORD``)."""
    if not is_url(address):
        return absolute(address)
    import re

    text = re.sub(_USERINFO, r"\1@", str(address))
    text = re.sub(r"([?&])password=[^&\s]*&?", r"\1", text)
    return text.rstrip("?&")


def busy_timeout() -> float:
    """How long a write waits for another writer's transaction before giving up."""
    return _seconds(BUSY_ENV, BUSY_S, 0, 86_400)


def host_name() -> str:
    """This host's name in the run history: ``$DATAFLOW_HOST``, else the node name. A name
    with a control character (a newline...) or longer than 255 characters is refused."""
    name = os.environ.get(HOST_ENV) or os.uname().nodename
    if len(name) > 255 or any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in name):
        from ..errors import UsageError

        shown_name = name[:60].encode("unicode_escape").decode("ascii")
        raise UsageError(
            f"{HOST_ENV} must be a host name of printable characters (at most 255), "
            f"not '{shown_name}'"
        )
    return name


LOG_MAX_ENV = "DATAFLOW_LOG_MAX_MB"
LOG_MAX_MB = 1024.0  # a run's log stops growing here (the console still gets everything)
LOG_KEEP_ENV = "DATAFLOW_LOG_KEEP_KB"
LOG_KEEP_KB = 1024  # the last part of a run's log the store keeps (0: none)
LOG_EVERY_ENV = "DATAFLOW_LOG_EVERY"
LOG_EVERY_S = 5.0  # seconds between two pieces of a running job's log sent to the store
ALERT_TIMEOUT_ENV = "DATAFLOW_ALERT_TIMEOUT"
ALERT_TIMEOUT_S = 10.0
STATE_ENV = "DATAFLOW_STATE"  # this host's folder of a shared store's logs and lock file


def log_max_mb() -> float:
    """Megabytes a run's log may grow to (``DATAFLOW_LOG_MAX_MB``, default 1024)."""
    return _number(LOG_MAX_ENV, LOG_MAX_MB, 0.001, 1 << 20, "megabytes")


def log_keep_bytes() -> int:
    """Bytes of the end of a run's log the store keeps (``DATAFLOW_LOG_KEEP_KB``
    kibibytes, default 1024; 0: none, the log stays on its host only)."""
    return int(_number(LOG_KEEP_ENV, LOG_KEEP_KB, 0, 1 << 20, "kibibytes")) * 1024


def log_every() -> float:
    """Seconds between two pieces of a running job's log sent to the store
    (``DATAFLOW_LOG_EVERY``, default 5)."""
    return _seconds(LOG_EVERY_ENV, LOG_EVERY_S, 0.1, 3600)


def alert_timeout() -> float:
    """Seconds an alert may take before it is given up (``DATAFLOW_ALERT_TIMEOUT``, 10)."""
    return _seconds(ALERT_TIMEOUT_ENV, ALERT_TIMEOUT_S, 0.5, 600)


def _absolute_path(name: str, what: str) -> str | None:
    """A path from the environment (``~`` expanded), None when it is not set; one set
    empty or relative is refused: what it names would depend on where a command started."""
    found = os.environ.get(name)
    if found is None:
        return None
    path = expanded(found)
    if not found.strip() or not path.startswith("/"):
        from ..errors import UsageError

        shown_value = found[:60].encode("unicode_escape").decode("ascii")
        raise UsageError(f"{name} must be an absolute path to {what}, not '{shown_value}'")
    return path


def state_folder() -> str | None:
    """This host's folder of a shared store's logs and lock file (``$DATAFLOW_STATE``),
    or None when it is not set."""
    return _absolute_path(STATE_ENV, "a folder")


def check_policy_path() -> None:
    """Refuse a ``$DATAFLOW_POLICY`` set empty or relative, or naming no file (the rule of
    :func:`dataflow.policy.path_of`) for every command: one that does not read the policy
    (a job without a setting that needs it) would otherwise take the mistake silently."""
    from ..policy import path_of

    path_of(os.environ)


def check_environment() -> None:
    """Refuse a DATAFLOW_* setting of the environment that is not usable, before a store
    is opened: one line naming the variable and what it accepts."""
    liveness_timeout()
    holder_idle()
    busy_timeout()
    direct_address()
    host_name()
    log_max_mb()
    log_keep_bytes()
    log_every()
    alert_timeout()
    state_folder()
    check_policy_path()
