"""Safe registration of datasets and jobs, export/import, and rekeying passwords.

Every change is validated first and written in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from .. import crypto
from ..dataids import CLOCKS
from ..errors import (
    DataflowError,
    RegistrationError,
    SealBroken,
    UnknownDataset,
    UnknownJob,
    WrongPasskey,
)
from ..policy import load
from ..run.claim.envnames import is_variable_name, refusal, unsafe, why
from ..run.claim.settings import SETTINGS, settings_of
from ..run.listeners import alerts
from ..run.listeners.alerts import ALERTS, STORE_WIDE, invalid
from ..run.spark import sparkconnect, sparksubmit
from ..store import DATASET_COLUMNS, Row, Store
from .lineage import find_cycle, job_graph

EXPORT_VERSION = 1
LOCKED = "locked"  # the store-wide setting: a job's rows change only through utility apply
STORE_SETTINGS = (ALERTS, LOCKED)


def _check_dataset_name(datasetid: str) -> None:
    if not is_variable_name(datasetid) or datasetid in CLOCKS:
        raise RegistrationError(
            f"dataset name '{datasetid}' must be usable in environment variable names "
            "(letters, digits and _, not starting with a digit) and not a clock ("
            + ", ".join(f"'{clock}'" for clock in CLOCKS)
            + ")"
        )
    if unsafe(f"{datasetid}_hostname"):
        raise RegistrationError(f"dataset name '{datasetid}': {why(datasetid + '_...')}")


def register_dataset(store: Store, row: Row, password: str | None, passkey: str | None) -> bool:
    """Add or update a dataset; the password (never from argv) is stored encrypted.
    Returns True when the dataset is new."""
    datasetid = str(row["datasetid"])
    _check_dataset_name(datasetid)
    if password is not None and passkey is None:
        raise RegistrationError("a password needs the passkey: set PASSKEY or PASSKEY_FILE")
    with store.transaction():
        old = store.datasets([datasetid])
        before = old.get(datasetid, {})
        merged = {**before, **{k: v for k, v in row.items() if v is not None}}
        token = before.get("encryptedpass")
        moved = crypto.is_sealed(token) and crypto.seal_of(before) != crypto.seal_of(merged)
        if password is None and moved:  # its sealed password follows it to its new address
            if passkey is None:
                raise RegistrationError(
                    f"dataset '{datasetid}': its password is sealed to its address; changing "
                    "the address needs the passkey (PASSKEY or PASSKEY_FILE)"
                )
            what = f"the password of dataset '{datasetid}'"
            password = crypto.decrypt(str(token), passkey, what, crypto.seal_of(before))
        if password is not None and passkey is not None:
            merged["encryptedpass"] = crypto.encrypt(password, passkey, seal=crypto.seal_of(merged))
        store.put_dataset(merged)
        return not old


def unregister_dataset(store: Store, datasetid: str) -> None:
    with store.transaction():
        users = store.jobs_using(datasetid, "IN") + store.jobs_using(datasetid, "OUT")
        if users:
            raise RegistrationError(f"dataset '{datasetid}' is used by job(s) {', '.join(users)}")
        if not store.delete_dataset(datasetid):
            raise UnknownDataset(datasetid)


def _job_items(
    jobid: str, inputs: list[str], outputs: list[str], settings: dict[str, str], env: dict[str, str]
) -> list[tuple[str, str | None, str | None]]:
    items = [("IN", d, None) for d in inputs] + [("OUT", d, None) for d in outputs]
    items += [(name, None, value) for name, value in settings.items()]
    items += [(name, None, value) for name, value in env.items()]
    return items


def _validate_job(
    store: Store, jobid: str, items: list[tuple[str, str | None, str | None]]
) -> None:
    """Names, referenced datasets, one producer per dataset, no cycle, valid settings."""
    if not jobid or "/" in jobid or jobid.startswith(".") or jobid == STORE_WIDE:
        raise RegistrationError(f"job name '{jobid}' cannot be a script name")
    known = set(store.datasets())
    outputs = [d for t, d, _ in items if t == "OUT"]
    inputs = [d for t, d, _ in items if t == "IN"]
    if not outputs:
        raise RegistrationError(f"job '{jobid}' needs at least one OUT dataset")
    if not inputs:
        raise RegistrationError(
            f"job '{jobid}' needs at least one IN dataset ('today' for a daily job)"
        )
    if set(inputs) & set(outputs):
        raise RegistrationError(f"job '{jobid}' cannot read and write the same dataset")
    if twice := sorted({d for d in inputs + outputs if (inputs + outputs).count(d) > 1}):
        raise RegistrationError(f"job '{jobid}' lists dataset '{twice[0]}' more than once")
    for dataset in inputs + outputs:
        if dataset not in CLOCKS and dataset not in known:
            raise UnknownDataset(dataset)
        if dataset in CLOCKS and dataset in outputs:
            raise RegistrationError(f"'{dataset}' can only be an IN dataset")
    if len(clocks := [d for d in inputs if d in CLOCKS]) > 1:
        raise RegistrationError(
            f"job '{jobid}' has two clocks as IN datasets: {' and '.join(clocks)}"
        )
    for dataset in outputs:
        others = [j for j in store.jobs_using(dataset, "OUT") if j != jobid]
        if others:
            raise RegistrationError(f"dataset '{dataset}' is already produced by job '{others[0]}'")
    settings = {t: v or "" for t, _, v in items if t in SETTINGS}
    settings_of(jobid, settings)
    for itemtype, _, _ in items:
        if itemtype not in ("IN", "OUT", *SETTINGS) and (why_not := refusal(itemtype, load())):
            raise RegistrationError(f"job '{jobid}': {why_not}")
    if why_not := refused_settings(settings):
        raise RegistrationError(f"job '{jobid}': {why_not}")
    rows = [r for r in store.job_rows() if r["jobid"] != jobid]
    rows += [{"jobid": jobid, "itemtype": t, "datasetid": d} for t, d, _ in items]
    if cycle := find_cycle(job_graph(rows)):
        raise RegistrationError(f"job '{jobid}' would make a cycle: {' -> '.join(cycle)}")


def refused_settings(settings: dict[str, str]) -> str | None:
    """Why this host's policy does not allow settings that become a command line, an
    address or a target on a host (checked where they are written: the host that runs
    the job checks them again), or None."""
    if args := settings.get("spark_args", "").strip():
        split = sparksubmit.split_args(args, "the setting spark_args")
        if why_not := load().spark_args_refusal(split):
            return f"setting spark_args: {why_not}"
    remote = settings.get("spark_remote", "").strip()
    if remote and (why_not := sparkconnect.refusal(remote)):
        return f"setting spark_remote: {why_not}"
    for url in alerts.split(settings.get(ALERTS, "")):
        if why_not := alerts.refusal(url):
            return f"setting {ALERTS}: {why_not}"
    return None


def register_job(
    store: Store,
    jobid: str,
    inputs: list[str],
    outputs: list[str],
    settings: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> bool:
    """Add or replace a job's registration; returns True when the job is new."""
    items = _job_items(jobid, inputs, outputs, settings or {}, env or {})
    with store.transaction():
        refuse_if_locked(store, f"job '{jobid}' not registered")
        try:
            _validate_job(store, jobid, items)
        except UnknownDataset as exc:  # said with the command lines that register them
            known = store.datasets()
            unknown = [d for d in inputs + outputs if d not in CLOCKS and d not in known]
            raise UnknownDataset(exc.datasetid, unknown or [exc.datasetid]) from None
        new = not store.job_items(jobid)
        store.put_job(jobid, items)
        return new


def change_job(store: Store, jobid: str, assign: dict[str, str], remove: Iterable[str]) -> None:
    """Set or remove a registered job's settings and environment names, validated as a whole."""
    remove = list(remove)
    for name in [*assign, *remove]:
        if name in ("IN", "OUT"):
            raise RegistrationError(f"'{name}' is changed by register-job, not set/unset")
    if jobid == STORE_WIDE:
        return _change_store_wide(store, assign, remove)
    with store.transaction():
        refuse_if_locked(store, f"job '{jobid}' not changed")
        items = store.job_items(jobid)
        if not items:
            raise UnknownJob(jobid, store.job_ids())
        named = {i.itemtype for i in items if i.itemtype not in ("IN", "OUT")}
        if missing := [n for n in remove if n not in named]:
            raise RegistrationError(f"job '{jobid}' has no setting '{missing[0]}'")
        kept = [
            (i.itemtype, i.datasetid, i.itemvalue)
            for i in items
            if i.itemtype in ("IN", "OUT")
            or (i.itemtype not in assign and i.itemtype not in remove)
        ]
        kept += [(name, None, value) for name, value in assign.items()]
        _validate_job(store, jobid, kept)
        store.put_job(jobid, kept)


def _change_store_wide(store: Store, assign: dict[str, str], remove: list[str]) -> None:
    """Set or remove store-wide settings: those of the pseudo-job ``*`` (``alerts``, the
    default of every job; ``locked``, see :func:`refuse_if_locked`)."""
    for name in [*assign, *remove]:
        if name not in STORE_SETTINGS:
            raise RegistrationError(
                f"'{name}' is not a store-wide setting (only {' and '.join(STORE_SETTINGS)} are)"
            )
    if assign.get(LOCKED, "true") not in ("true", "false"):
        raise RegistrationError(f"setting {LOCKED} must be true or false, not '{assign[LOCKED]}'")
    if why_not := invalid(assign.get(ALERTS, "")):
        raise RegistrationError(f"setting {ALERTS} must be Apprise URLs: {why_not}")
    if why_not := refused_settings({ALERTS: assign.get(ALERTS, "")}):
        raise RegistrationError(f"store-wide {why_not}")
    with store.transaction():
        items = store.job_items(STORE_WIDE)
        if missing := [n for n in remove if n not in {i.itemtype for i in items}]:
            raise RegistrationError(f"no store-wide setting '{missing[0]}'")
        kept = [
            (i.itemtype, None, i.itemvalue) for i in items if i.itemtype not in (*assign, *remove)
        ]
        store.put_job(STORE_WIDE, kept + [(name, None, value) for name, value in assign.items()])


def is_locked(store: Store) -> bool:
    """Does the store take its jobs only from a deploy (``utility set '*' locked=true``)?"""
    return any(i.itemtype == LOCKED and i.itemvalue == "true" for i in store.job_items(STORE_WIDE))


def refuse_if_locked(store: Store, what: str) -> None:
    """Refuse a change of a job's rows made otherwise than by ``utility apply`` (which
    writes through the store), while the store is locked: it can no longer drift from git."""
    if is_locked(store):
        raise RegistrationError(
            f"{what}: this store takes jobs only from a deploy: change dataflow.toml and run "
            f"utility apply (the store-wide setting {LOCKED})"
        )


def unregister_job(store: Store, jobid: str) -> int:
    """Remove a job's rows from table job (its chunks' statuses stay, as history)."""
    with store.transaction():
        refuse_if_locked(store, f"job '{jobid}' not removed")
        removed = store.delete_job(jobid)
        if not removed:
            raise UnknownJob(jobid, store.job_ids())
        return removed


def export(store: Store) -> str:
    """The whole configuration (datasets, jobs) as one JSON document."""
    jobs: dict[str, list[dict]] = {}
    for row in store.job_rows():
        item = {k: row[k] for k in ("itemtype", "datasetid", "itemvalue") if row[k] is not None}
        jobs.setdefault(row["jobid"], []).append(item)
    document = {
        "opendataflow": EXPORT_VERSION,
        "datasets": list(store.datasets().values()),
        "jobs": jobs,
    }
    return json.dumps(document, indent=2)


def _text(value: object, what: str, required: bool = False) -> str | None:
    """A value of an exported document: text (or null unless ``required``), as exported."""
    if isinstance(value, str) and "\0" in value:  # no store's text may hold one
        raise ValueError(f"{what} must not hold a NUL character")
    if isinstance(value, str) or (value is None and not required):
        return value
    raise ValueError(f"{what} must be text, not {_kind(value)}")


def _kind(value: object) -> str:
    """A JSON value's kind, as a person names it."""
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "text"}
    kinds.update({list: "a list", dict: "an object", type(None): "null"})
    return kinds.get(type(value), "something else")


def _shaped(value: object, kind: type, what: str, shape: str) -> None:
    if not isinstance(value, kind):
        raise ValueError(f"{what} must be {shape}, not {_kind(value)}")


def _parse(text: str) -> tuple[list[Row], dict[str, list[tuple[str, str | None, str | None]]]]:
    """The dataset rows and job items of an exported document, its shape and every value
    checked: a mistake is named where it is (``job 'X': item 2 must be an object``)."""
    try:
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from None
        _shaped(document, dict, "the document", "an object")
        if document.get("opendataflow") != EXPORT_VERSION:
            raise ValueError(f"unsupported version {document.get('opendataflow')!r}")
        for key, kind, shape in (("datasets", list, "a list"), ("jobs", dict, "an object")):
            if key not in document:
                raise ValueError(f"the document has no '{key}'")
            _shaped(document[key], kind, f"'{key}'", shape)
        rows = []
        for n, dataset in enumerate(document["datasets"], 1):
            _shaped(dataset, dict, f"dataset {n}", "an object")
            rows.append(
                {
                    c: _text(dataset.get(c), f"dataset {n}: {c}", c == "datasetid")
                    for c in DATASET_COLUMNS
                }
            )
        parsed = {}
        for jobid, items in document["jobs"].items():
            _text(jobid, "a job's name", required=True)
            _shaped(items, list, f"job '{jobid}'", "a list of items")
            parsed[jobid] = []
            for n, item in enumerate(items, 1):
                where = f"job '{jobid}': item {n}"
                _shaped(item, dict, where, "an object")
                parsed[jobid].append(
                    (
                        _text(item.get("itemtype"), f"{where}: itemtype", required=True),
                        _text(item.get("datasetid"), f"{where}: datasetid"),
                        _text(item.get("itemvalue"), f"{where}: itemvalue"),
                    )
                )
    except RecursionError:
        raise RegistrationError("not an OpenDataFlow export: nested too deeply") from None
    except ValueError as exc:
        raise RegistrationError(f"not an OpenDataFlow export: {exc}") from None
    return rows, parsed


def import_(store: Store, text: str) -> tuple[int, int]:
    """Add or replace the datasets and jobs of an exported document, all or nothing."""
    rows, parsed = _parse(text)
    with store.transaction():
        if parsed:
            refuse_if_locked(store, "nothing imported")
        for row in rows:
            _check_dataset_name(str(row["datasetid"]))
            store.put_dataset(row)
        for jobid in parsed:
            store.delete_job(jobid)  # so one producer per dataset is checked against the new set
        for jobid, items in parsed.items():
            _validate_job(store, jobid, items)
            store.put_job(jobid, items)
    return len(rows), len(parsed)


def rekey(store: Store, old: str, new: str) -> int:
    """Re-encrypt every stored password under a new passkey, in one transaction."""
    if not new:
        raise DataflowError("the new passkey is empty")
    with store.transaction():
        tokens = store.passwords()
        rows = store.datasets([datasetid for datasetid, _ in tokens])
        for datasetid, token in tokens:
            seal = crypto.seal_of(rows[datasetid])
            what = f"the password of dataset '{datasetid}'"
            try:
                password = crypto.decrypt(token, old, what, seal)
            except (WrongPasskey, SealBroken):  # a sealed one: or its address moved
                raise WrongPasskey(f"{what} with the old passkey; nothing changed") from None
            store.set_password(datasetid, crypto.encrypt(password, new, seal=seal))  # sealed
        return len(tokens)


def parse_pairs(pairs: Iterable[str], what: str) -> dict[str, str]:
    """``name=value`` words from the command line."""
    result = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise RegistrationError(f"{what} must be NAME=VALUE, not '{pair}'")
        result[name] = value
    return result
