"""What this host lets a row of the store use: the host's policy.

The store is open to every client that can write it, so a row is data: it may choose
among what the host allows, never add to it. Whatever a row would turn into a process's
environment, a command-line argument, an address to reach or a file to open on this host
is honoured only if it is allowed here, by the toolkit's own defaults (which carry no
code, no path and no address) or by the host's policy file:

- ``$DATAFLOW_POLICY``, else ``~/.config/opendataflow/policy.toml``, else
  ``/etc/opendataflow/policy.toml``, the first that is set or exists (none: the defaults).

A TOML file; every list adds to the defaults::

    [env]        # names a job row may give its job (NAME, or a family NAME*) beside
                 # the toolkit's own items (dataid_column, <dataset>_dataid_column)
    allow = ["REGION", "ETL_*"]

    [spark]      # --conf NAME=... names (NAME, or NAME*); spark_remote servers
    confs = ["spark.sql.catalog.lake.*"]
    remotes = ["sc://connect.etl.example.com:15002"]

    [spark.options]  # spark_args: options and the values each may take ("*": any value)
    "--master" = ["yarn"]
    "--jars" = ["/opt/etl/jars/*.jar"]

    [alerts]     # alert targets: scheme:// (any target of it) or scheme://host[:port]
    targets = ["slack://", "json://hooks.etl.example.com"]
    params = ["priority"]  # query parameters an alert URL may carry

In a value pattern ``*`` matches any run of characters but ``/``; a pattern that is ``*``
alone matches any value.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Iterable, Mapping

from .errors import PolicyError

POLICY_ENV = "DATAFLOW_POLICY"
PLACES = ("~/.config/opendataflow/policy.toml", "/etc/opendataflow/policy.toml")
# names of the toolkit's own: no policy lets a row give them
RESERVED_NAMES = ("dataid", "jobid")
RESERVED_PREFIXES = ("DATAFLOW_", "PASSKEY")
# job items the toolkit's job side reads (dataflow.spark: which column holds a chunk's
# dataid), alone or after a dataset's name: a column's name, no program reads them
JOB_ITEMS = ("dataid_column",)

ANY = ("*",)
# spark-submit options that carry no code, no file and no address; "" for a flag
SPARK_OPTIONS: dict[str, tuple[str, ...]] = {
    "--master": ("local", "local[*]"),
    "--deploy-mode": ("client", "cluster"),
    "--name": ANY,
    "--queue": ANY,
    "--driver-memory": ANY,
    "--driver-cores": ANY,
    "--executor-memory": ANY,
    "--executor-cores": ANY,
    "--num-executors": ANY,
    "--total-executor-cores": ANY,
    "--verbose": ("",),
}
CONF_OPTIONS = ("--conf", "-c")
FLAGS = ("--verbose", "-v", "--supervise")  # spark-submit's options that take no value
# Spark confs that size or tune a job: no class, no path, no address, no JVM option
SPARK_CONFS = (
    "spark.app.name",
    "spark.log.level",
    "spark.ui.enabled",
    "spark.ui.showConsoleProgress",
    "spark.driver.memory",
    "spark.driver.memoryOverhead",
    "spark.driver.cores",
    "spark.driver.maxResultSize",
    "spark.executor.memory",
    "spark.executor.memoryOverhead",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.cores.max",
    "spark.task.cpus",
    "spark.memory.fraction",
    "spark.memory.storageFraction",
    "spark.default.parallelism",
    "spark.network.timeout",
    "spark.dynamicAllocation.enabled",
    "spark.dynamicAllocation.minExecutors",
    "spark.dynamicAllocation.maxExecutors",
    "spark.dynamicAllocation.initialExecutors",
    "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.enabled",
    "spark.sql.adaptive.coalescePartitions.enabled",
    "spark.sql.autoBroadcastJoinThreshold",
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.session.timeZone",
)
# Apprise's query parameters that shape a message or name its recipients: none names a
# file (keyfile=, attach=), a server (smtp=), a header (+X=), or turns a check off (verify=)
ALERT_PARAMS = (
    "format",
    "overflow",
    "emojis",
    "footer",
    "image",
    "avatar",
    "to",
    "cc",
    "bcc",
    "from",
    "name",
)


class Policy(
    namedtuple("Policy", "source env options confs remotes targets params", defaults=("",) * 6)
):
    """A host's policy: what the defaults and its file (``source``, "" for none) allow."""

    __slots__ = ()

    @property
    def where(self) -> str:
        """Where a person adds to it, for a refusal's line."""
        return f"the host's policy {self.source}" if self.source else _placement()

    def env_allowed(self, name: str) -> bool:
        """May a job row give its job the variable ``name``?"""
        if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
            return False
        if name in JOB_ITEMS or name.endswith(tuple("_" + item for item in JOB_ITEMS)):
            return True
        return any(_names_match(pattern, name) for pattern in self.env)

    def env_refusal(self, name: str) -> str:
        if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
            return f"'{name}' is a variable of the toolkit's own: no store row sets it"
        return (
            f"'{name}' is not an environment name this host lets a store row set: add it "
            f"to [env] allow in {self.where}"
        )

    def spark_args_refusal(self, args: list[str]) -> str | None:
        """Why ``spark_args`` (split as a shell would) is not allowed here, or None."""
        try:
            given = spark_options(args)
        except ValueError as exc:
            return str(exc)
        for option, value in given:
            if option in CONF_OPTIONS:
                name = value.partition("=")[0]
                if not any(_names_match(pattern, name) for pattern in self.confs):
                    return self._spark(f"Spark conf {name}", "[spark] confs")
            elif value is None:
                if "" not in self.options.get(option, ()):
                    return self._spark(f"option {option}", "[spark] options")
            elif not all(
                any(_value_match(p, part) for p in self.options.get(option, ()))
                for part in _parts(option, value)
            ):
                what = f"option {option} {value}" if option in self.options else f"option {option}"
                return self._spark(what, "[spark] options")
        return None

    def _spark(self, what: str, where: str) -> str:
        return f"{what} is not allowed by this host: add it to {where} in {self.where}"

    def remote_refusal(self, host: str, port: int) -> str | None:
        """Why a Spark Connect server named by a row may not be reached, or None."""
        import re

        for entry in self.remotes:
            found = re.fullmatch(r"sc://(\[[^\]]+\]|[^:/;]+)(?::(\d+))?/?", entry.strip())
            same = found and found[1].strip("[]").lower() == host.lower()
            if same and (found[2] is None or int(found[2]) == port):
                return None
        return (
            f"the Spark Connect server {host}:{port} is not one this host lets a store row "
            f"name: add sc://{host}:{port} to [spark] remotes in {self.where}"
        )

    def alert_refusal(self, scheme: str, host: str, port: str, params: Iterable[str]) -> str | None:
        """Why an alert target named by a row may not be reached, or None."""
        scheme = scheme.lower()
        if not any(_target_match(entry, scheme, host, port) for entry in self.targets):
            where = f"{scheme}://{host}" if host else f"{scheme}://"
            return f"alert target {where} is not allowed by this host: add it to [alerts] targets in {self.where}"
        for param in params:
            if param.lower() not in self.params:
                return (
                    f"alert parameter '{param}' is not allowed by this host: add it to "
                    f"[alerts] params in {self.where}"
                )
        return None


LISTS = ("--jars", "--files", "--py-files", "--archives", "--packages", "--repositories")


def spark_options(args: list[str], lenient: bool = False) -> list[tuple[str, str | None]]:
    """spark-submit's arguments as (option, value) pairs, as spark-submit reads them:
    ``--name=value`` or ``--name value``, a flag with no value (None); ValueError for an
    option left without its value, and for a word that is not an option unless ``lenient``
    (then it is a pair of its own, valueless: the host's arguments are not judged here)."""
    pairs: list[tuple[str, str | None]] = []
    at = 0
    while at < len(args):
        option, eq, value = args[at].partition("=")
        if not option.startswith("-"):
            if not lenient:
                raise ValueError(f"'{args[at]}' is not a spark-submit option")
            pairs.append((args[at], None))
            at += 1
            continue
        at += 1
        if option in FLAGS and not eq:
            pairs.append((option, None))
            continue
        if not eq:
            if at >= len(args):
                raise ValueError(f"option {option} has no value")
            value, at = args[at], at + 1
        pairs.append((option, value))
    return pairs


def _parts(option: str, value: str) -> list[str]:
    """The entries of a value spark-submit reads as a comma-separated list (each is
    matched on its own: an allowed jar never brings another with it)."""
    return value.split(",") if option in LISTS else [value]


def _placement() -> str:
    return f"a policy file (${POLICY_ENV}, or {' or '.join(PLACES)}; docs/guarantees.md)"


def _names_match(pattern: str, name: str) -> bool:
    return name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1]))


def _value_match(pattern: str, value: str) -> bool:
    if pattern == "*":
        return True
    import re

    regex = "[^/]*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, value) is not None


def _target_match(entry: str, scheme: str, host: str, port: str) -> bool:
    import re

    found = re.fullmatch(r"([A-Za-z][\w+.-]*)://(\[[^\]]+\]|[^:/]*)(?::(\d+))?/?", entry.strip())
    if found is None or found[1].lower() != scheme:
        return False
    if not found[2]:
        return True
    return found[2].strip("[]").lower() == host.lower() and found[3] in (None, port)


def path_of(environ: Mapping[str, str]) -> str | None:
    """The policy file of this host: ``$DATAFLOW_POLICY``, else the first place that
    exists; None when there is none."""
    named = environ.get(POLICY_ENV)
    if named is not None:
        path = os.path.expanduser(named)
        if not named.strip() or not os.path.isabs(path):
            shown = named[:60].encode("unicode_escape").decode("ascii")
            raise PolicyError(
                f"{POLICY_ENV} must be an absolute path to a policy file, not '{shown}'"
            )
        if not os.path.isfile(path):
            raise PolicyError(f"{POLICY_ENV} names no file: {path} (docs/policy.md)")
        return path
    home = environ.get("HOME") or os.path.expanduser("~")
    for place in PLACES:
        path = os.path.join(home, place[2:]) if place.startswith("~/") else place
        if os.path.exists(path):
            return path
    return None


_loaded: dict[tuple, Policy] = {}


def load(environ: Mapping[str, str] | None = None) -> Policy:
    """This host's policy (read again only when its file changed)."""
    path = path_of(os.environ if environ is None else environ)
    if path is None:
        return _defaults("")
    try:
        found = os.stat(path)
    except OSError as exc:
        raise PolicyError(f"cannot read the host's policy {path}: {exc.strerror}") from None
    key = (path, found.st_mtime_ns, found.st_size, found.st_ino)
    if key not in _loaded:
        _loaded[key] = _read(path)
    return _loaded[key]


def _defaults(source: str) -> Policy:
    options = {name: tuple(values) for name, values in SPARK_OPTIONS.items()}
    return Policy(source, (), options, SPARK_CONFS, (), (), ALERT_PARAMS)


def _read(path: str) -> Policy:
    import tomllib  # only on a host that has a policy file

    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as exc:
        raise PolicyError(f"cannot read the host's policy {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"the host's policy {path} is not TOML: {exc}") from None
    except UnicodeDecodeError:
        raise PolicyError(f"the host's policy {path} is not UTF-8 text") from None
    except RecursionError:
        raise PolicyError(f"the host's policy {path} is nested too deeply") from None
    base = _defaults(path)
    known = {
        "env": ("allow",),
        "spark": ("options", "confs", "remotes"),
        "alerts": ("targets", "params"),
    }
    for table, value in data.items():
        if table not in known or not isinstance(value, dict):
            raise PolicyError(
                f"the host's policy {path}: unknown table [{table}] (known: env, spark, alerts)"
            )
        for key in value:
            if key not in known[table]:
                raise PolicyError(f"the host's policy {path}: unknown key {key} in [{table}]")
    spark = data.get("spark", {})
    options = dict(base.options)
    extra = spark.get("options", {})
    if not isinstance(extra, dict):
        raise PolicyError(f"the host's policy {path}: [spark] options must be a table")
    for option, values in extra.items():
        values = [values] if isinstance(values, str) else values
        options[option] = (
            *options.get(option, ()),
            *_strings(path, f"[spark] options {option}", values),
        )
    alerts = data.get("alerts", {})
    return base._replace(
        env=_strings(path, "[env] allow", data.get("env", {}).get("allow", [])),
        options=options,
        confs=base.confs + _strings(path, "[spark] confs", spark.get("confs", [])),
        remotes=_strings(path, "[spark] remotes", spark.get("remotes", [])),
        targets=_strings(path, "[alerts] targets", alerts.get("targets", [])),
        params=base.params
        + tuple(p.lower() for p in _strings(path, "[alerts] params", alerts.get("params", []))),
    )


def _strings(path: str, what: str, values: object) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise PolicyError(f"the host's policy {path}: {what} must be a list of strings")
    return tuple(values)
