"""``utility plan`` and ``utility apply``: the store made to match a project.

A plan lists what applying would change, dataset by dataset and job by job, setting by
setting; it is checked exactly as an apply is (the same writes, in a transaction that is
then undone), so a plan that passes is an apply that passes. An apply writes only what
changed, in one transaction, and records the deploy.
"""

from __future__ import annotations

from collections import namedtuple

from .. import crypto
from ..dataids import CLOCKS
from ..errors import DataflowError, ProjectError, RegistrationError
from ..run.claim import liveness
from ..run.claim.settings import SETTINGS
from ..run.listeners.alerts import STORE_WIDE
from ..store import DATASET_COLUMNS, Row, Store
from . import registry
from .project import Project, Secret, line_of, secret_text

Change = namedtuple("Change", "sign kind name detail")  # sign: + added, ~ changed, - removed
KEPT = "="  # in the store, not in the project: kept (--prune removes it)


def plan(store: Store, project: Project, passkey: str | None, prune: bool = False) -> list[Change]:
    """What applying ``project`` would change; nothing is changed."""

    class _Undo(Exception):
        pass

    found: list[Change] = []
    try:
        with store.transaction():
            found = _write(store, project, passkey, prune)
            raise _Undo
    except _Undo:
        pass
    return found


def apply(store: Store, project: Project, passkey: str | None, prune: bool = False) -> list[Change]:
    """Make the store match ``project`` in one transaction; the changes made."""
    with store.transaction():
        changes = _write(store, project, passkey, prune)
        store.add_deploy(
            liveness.host_name(),
            str(project.folder.resolve()),
            project.digest,
            project.revision,
            summary(changes),
        )
    return changes


def summary(changes: list[Change]) -> str:
    """``2 added, 1 changed, 0 removed`` (objects, not settings)."""
    counts = {sign: len({(c.kind, c.name) for c in changes if c.sign == sign}) for sign in "+~-"}
    return f"{counts['+']} added, {counts['~']} changed, {counts['-']} removed"


def is_change(change: Change) -> bool:
    return change.sign != KEPT


def _write(store: Store, project: Project, passkey: str | None, prune: bool) -> list[Change]:
    old_datasets = store.datasets()
    old_jobs: dict[str, list[tuple]] = {}
    for row in store.job_rows():
        if row["jobid"] != STORE_WIDE:
            old_jobs.setdefault(row["jobid"], []).append(
                (row["itemtype"], row["datasetid"], row["itemvalue"])
            )
    changes: list[Change] = []
    for name, row in project.datasets.items():
        row = _checked(
            project,
            ("datasets", name, "password"),
            lambda n=name, r=row: _with_password(n, r, old_datasets.get(n), passkey),
        )
        found = _dataset_changes(name, row, old_datasets.get(name))
        if found:
            _checked(project, ("datasets", name), lambda r=row: _put_dataset(store, r))
            changes += found
    for name, items in project.jobs.items():
        for kind, datasetid, _ in items:
            if kind in ("IN", "OUT") and _foreign(project, datasetid):
                raise ProjectError(
                    project.file,
                    line_of(project, "jobs", name, kind.lower()),
                    f"job '{name}' uses dataset '{datasetid}', which the project does not declare",
                )
    for name in sorted(set(old_jobs) - set(project.jobs)):  # first: a job renamed is no rival
        if prune:
            _refuse_live(store, name)
            store.delete_job(name)
        changes.append(Change("-" if prune else KEPT, "job", name, ""))
    found_in = {n: _job_changes(n, i, old_jobs.get(n)) for n, i in project.jobs.items()}
    changed = {n: i for n, i in project.jobs.items() if found_in[n]}
    for name in changed:
        store.delete_job(name)  # one producer per dataset is checked against the new set
    for name, items in changed.items():
        _checked(project, ("jobs", name), lambda n=name, i=items: _put_job(store, n, i))
    for name, items in project.jobs.items():  # what a fresh apply would refuse, a plan does
        if name not in changed:
            _checked(
                project, ("jobs", name), lambda n=name, i=items: registry._validate_job(store, n, i)
            )
    changes += [change for name in changed for change in found_in[name]]
    for name in sorted(set(old_datasets) - set(project.datasets)):
        if prune and not (store.jobs_using(name, "IN") + store.jobs_using(name, "OUT")):
            store.delete_dataset(name)
            changes.append(Change("-", "dataset", name, ""))
        else:
            changes.append(Change(KEPT, "dataset", name, ""))
    return changes


def _foreign(project: Project, datasetid: str) -> bool:
    return datasetid not in project.datasets and datasetid not in CLOCKS


def _checked(project: Project, keys: tuple[str, ...], write):
    """A write of the project's (what it returns); its refusal named at its line."""
    try:
        return write()
    except ProjectError:
        raise
    except DataflowError as exc:
        raise ProjectError(project.file, line_of(project, *keys), str(exc)) from None


def _put_dataset(store: Store, row: Row) -> None:
    registry._check_dataset_name(str(row["datasetid"]))
    store.put_dataset(row)


def _put_job(store: Store, jobid: str, items: list[tuple]) -> None:
    registry._validate_job(store, jobid, items)
    store.put_job(jobid, items)


def _with_password(name: str, row: Row, old: Row | None, passkey: str | None) -> Row:
    """The row with its password encrypted, sealed to its address: one in a file of the
    host is encrypted anew only when it or the address differs from what the store holds
    (the same text encrypts differently every time)."""
    secret = row["encryptedpass"]
    what = f"the password of dataset '{name}'"
    if not isinstance(secret, Secret):
        if secret and passkey is not None:  # it opens (for this address, if sealed)
            crypto.decrypt(str(secret), passkey, what, crypto.seal_of(row))
        elif (
            crypto.is_sealed(secret)
            and old
            and old.get("encryptedpass") == secret
            and crypto.seal_of(old) != crypto.seal_of(row)
        ):  # the dataset moved, its sealed token kept: it would open nowhere
            raise DataflowError(
                f"dataset '{name}': its password is sealed to its address; a project that "
                "moves it gives its password as { file = ... }"
            )
        return row
    seal, text = crypto.seal_of(row), secret_text(name, secret, passkey)
    kept = old.get("encryptedpass") if old else None
    if crypto.is_sealed(kept) and crypto.seal_of(old) == seal:
        try:
            if crypto.decrypt(str(kept), str(passkey), what, seal) == text:
                return {**row, "encryptedpass": kept}
        except DataflowError:  # sealed with another passkey: sealed anew
            pass
    return {**row, "encryptedpass": crypto.encrypt(text, str(passkey), seal=seal)}


def _dataset_changes(name: str, row: Row, old: Row | None) -> list[Change]:
    if old is None:
        return [Change("+", "dataset", name, "")]
    return [
        Change(
            "~",
            "dataset",
            name,
            _differs(column, old.get(column), row.get(column), column == "encryptedpass"),
        )
        for column in DATASET_COLUMNS[1:]
        if (old.get(column) or None) != (row.get(column) or None)
    ]


def _job_changes(name: str, items: list[tuple], old: list[tuple] | None) -> list[Change]:
    if old is None:
        return [Change("+", "job", name, "")]
    found = []
    for direction in ("IN", "OUT"):
        before = {d for t, d, _ in old if t == direction}
        after = {d for t, d, _ in items if t == direction}
        found += [Change("~", "job", name, f"{direction} + {d}") for d in sorted(after - before)]
        found += [Change("~", "job", name, f"{direction} - {d}") for d in sorted(before - after)]
    before = {t: v for t, _, v in old if t not in ("IN", "OUT")}
    after = {t: v for t, _, v in items if t not in ("IN", "OUT")}
    for key in sorted(set(before) | set(after), key=lambda k: (k not in SETTINGS, k)):
        if (before.get(key) or "") != (after.get(key) or "") or (key in before) != (key in after):
            secret = key == "alerts"  # an Apprise URL may hold a token
            found.append(
                Change("~", "job", name, _differs(key, before.get(key), after.get(key), secret))
            )
    return found


def _differs(what: str, old: object, new: object, secret: bool = False) -> str:
    if secret:
        return f"{what} changed"
    shown = ("(none)" if value is None else repr(str(value)) for value in (old, new))
    return f"{what}: {' -> '.join(shown)}"


def _refuse_live(store: Store, jobid: str) -> None:
    live = [d for j, d in store.running(jobid) if liveness.is_live(store, j, d)]
    if live:
        raise RegistrationError(
            f"job '{jobid}' is not in the project, but a run of it lives (dataid "
            f"{', '.join(live[:5])}): --prune removes it once its runs have ended"
        )
