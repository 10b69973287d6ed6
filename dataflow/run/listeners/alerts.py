"""Alerts: telling people that a chunk failed, died, was fenced off or recovered.

Where they go is the job's setting ``alerts`` (Apprise URLs: ``json://``, ``mailto://``,
``slack://``, ...), else the store-wide default: the ``alerts`` setting of the reserved
pseudo-job ``*``. A :class:`Pager` watches a drain's events and, once the drain has
ended (every status committed), sends one message: the alert of the one chunk, or a
summary of all of them. Sending is done by a child process (:mod:`.alertsend`) given
at most ``DATAFLOW_ALERT_TIMEOUT`` seconds and killed past them: a notifier that is
down or hangs never fails, delays or blocks a run beyond that bound. A URL may hold a
token: it is shown only through :func:`masked`, and never put on a command line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections import namedtuple
from urllib.parse import unquote

from ...dataids import natural_key
from ...errors import PolicyError
from ...policy import load
from ...store import Store, address, shown
from ..process.runner import child_environment

ALERTS = "alerts"  # the setting
STORE_WIDE = "*"  # the pseudo-job whose alerts setting is every job's default
LISTED = 20  # chunks a summary names; the rest are counted
MISSING = "alerts need: pip install opendataflow[alerts]"
SENDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alertsend.py")

Alert = namedtuple("Alert", "dataid what detail runid")  # one chunk's change, for people
# Apprise's notification types (NotifyType): what a receiver shows as an icon or a colour
INFO, SUCCESS, WARNING, FAILURE = "info", "success", "warning", "failure"
# the type of each kind of alert; a message of several kinds has the gravest one's
KINDS = {
    "FAILED": FAILURE,
    "validation failed": FAILURE,
    "abandoned": FAILURE,
    "fenced": WARNING,
    "recovered": SUCCESS,
}
GRAVITY = (INFO, SUCCESS, WARNING, FAILURE)
Delivery = namedtuple("Delivery", "url result why")  # url masked; result: sent/failed/...


def split(value: str | None) -> list[str]:
    """The URLs of a setting: separated by spaces, or by commas or semicolons before a
    ``scheme://`` (where Apprise splits them too)."""
    return [url for url in re.split(r"\s+|[,;]\s*(?=[\w+.-]+://)", value or "") if url]


def invalid(value: str) -> str | None:
    """Why a value cannot be an ``alerts`` setting (shown masked), or None."""
    for url in split(value):
        if not re.match(r"[A-Za-z][\w+.-]*://[^/?#\s]", url):
            return f"'{masked(url)}' is not a URL (scheme://host-or-token...)"
    return None


def refusal(url: str, policy=None) -> str | None:
    """Why this host will not send an alert to ``url`` (a row of the store names it), or
    None: its scheme and host must be among the host policy's targets, each of its query
    parameters among the parameters it allows (:mod:`dataflow.policy`). What Apprise
    could read otherwise than this does (a second ``@``, a ``;``, a ``#`` in the query)
    is refused; the sender checks again with Apprise's own parser (:mod:`.alertsend`)."""
    if why := invalid(url):
        return why
    scheme, _, rest = url.partition("://")
    before, _, query = rest.partition("?")
    authority = re.split(r"[/#]", before, maxsplit=1)[0]
    if authority.count("@") > 1 or ";" in rest or "#" in query:
        return f"'{masked(url)}' is ambiguous (a second @, a ; or a # in its query): encode it"
    host = authority.rsplit("@", 1)[-1]
    found = re.fullmatch(r"(\[[^\]]*\]|[^:]*)(?::(\d*))?", host)
    host, port = (found[1].strip("[]"), found[2]) if found else (host, None)
    params = [unquote(part.partition("=")[0]) for part in query.split("&") if part]
    return (policy or load()).alert_refusal(scheme, host, port, params)


def masked(url: str) -> str:
    """A URL for people: its scheme and host; a user, password, path or query (where
    Apprise URLs carry tokens) shown as ``***``."""
    scheme, found, rest = url.partition("://")
    if not found:
        return "***"
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    path = rest[len(authority) :]
    user = "***@" if "@" in authority else ""
    host = authority.rsplit("@", 1)[-1]
    # a word with no dot is a token where a service has no host (slack://T1/B2/C3)
    if not re.fullmatch(r"(localhost|\[[0-9a-fA-F:.]+\]|[\w-]+(\.[\w-]+)+)(:\d+)?", host):
        host = "***"
    return f"{scheme}://{user}{host}" + ("/***" if path.strip("/") else path[:1])


def timeout() -> float:
    """Seconds an alert may take before it is given up (``DATAFLOW_ALERT_TIMEOUT``, 10):
    a value that is not a number from 0.5 to 600 is refused, in one line, before the
    store is opened (:func:`dataflow.store.address.check_environment`)."""
    return address.alert_timeout()


def urls_for(store: Store, setting: str) -> list[str]:
    """Where a job's alerts go: its own setting, else the store-wide default."""
    if setting.strip():
        return split(setting)
    items = store.job_items(STORE_WIDE)
    return split(next((i.itemvalue for i in items if i.itemtype == ALERTS), ""))


def deliver(urls: list[str], title: str, body: str, kind: str = INFO) -> list[Delivery]:
    """Send one message of Apprise type ``kind`` (:data:`FAILURE`...) to each URL, within
    :func:`timeout` seconds in all; never raises."""
    import importlib.util  # only when there is something to send

    try:
        refused = {i: why for i, url in enumerate(urls) if (why := refusal(url))}
    except PolicyError as exc:  # the host's policy cannot be read: nothing is sent
        return [Delivery(masked(url), "refused", str(exc)) for url in urls]
    if refused:  # sent to the others only
        allowed = [url for i, url in enumerate(urls) if i not in refused]
        sent = iter(deliver(allowed, title, body, kind) if allowed else [])
        return [
            Delivery(masked(url), "refused", refused[i]) if i in refused else next(sent)
            for i, url in enumerate(urls)
        ]
    if importlib.util.find_spec("apprise") is None:
        return [Delivery(masked(url), "missing", MISSING) for url in urls]
    bound = timeout()
    wait = bound / (len(urls) + 1)
    request = {"urls": urls, "title": title, "body": body, "type": kind}
    request |= {"wait": wait, "bound": bound}
    heard: dict[int, tuple[str, str]] = {}
    late = ("failed", f"no answer within {bound:g} s ({address.ALERT_TIMEOUT_ENV})")
    try:
        sender = subprocess.Popen(
            [sys.executable, SENDER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=child_environment({}),
        )
        try:
            out, _ = sender.communicate(json.dumps(request).encode(), timeout=bound)
            late = ("failed", f"the sender ended with exit code {sender.returncode}")
        except subprocess.TimeoutExpired:
            sender.kill()
            out, _ = sender.communicate()
    except (OSError, ValueError) as exc:
        why = f"the sender failed: {type(exc).__name__}"
        return [Delivery(masked(url), "failed", why) for url in urls]
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            index, result, why = json.loads(line)
        except ValueError:  # a line cut short by the kill
            continue
        heard[index] = (result, why)
    if -1 in heard:
        return [Delivery(masked(url), "missing", MISSING) for url in urls]
    return [Delivery(masked(url), *heard.get(i, late)) for i, url in enumerate(urls)]


def failures(deliveries: list[Delivery]) -> str | None:
    """One line on the deliveries that failed, or None."""
    if any(d.result == "missing" for d in deliveries):
        return MISSING
    bad = [f"{d.url}: {d.why or d.result}" for d in deliveries if d.result != "sent"]
    return f"alert not sent to {'; '.join(bad)}" if bad else None


class Pager:
    """Collects a drain's alerts (chunks FAILED with no retry left, abandoned, fenced off,
    failing their validation, recovered) and sends them when it has ended."""

    def __init__(self, store: Store, job) -> None:
        self.store, self.job = store, job
        self.alerts: list[Alert] = []
        self._urls: list[str] | None = None  # read at the first alert: none costs nothing
        self._unread: str | None = None  # why they could not be read: said at the end

    def watch(self, notify):
        """``notify``, which also shows each event to the pager."""

        def both(event) -> None:
            notify(event)
            self.see(event)

        return both

    def see(self, event) -> None:
        kind, claim = event.kind, event.claim
        if kind == "ended" and event.status != "FAILED" and claim.attempt == 1:
            return  # the common case: no alert, no look at the store
        if kind not in ("abandoned", "fenced", "ended"):
            return
        if self._urls is None:  # read at the first event that may be news
            try:
                self._urls = self._read(lambda: urls_for(self.store, self.job.settings.alerts))
            except Exception as exc:  # the store failed: never a reason to stop the drain
                self._unread = f"alerts not sent: cannot read where they go ({exc})"
                return
        alert = self._alert(event) if self._urls else None
        if alert is not None:
            self.alerts.append(alert)

    def _alert(self, event) -> Alert | None:
        kind, dataid, claim, outcome = event.kind, event.dataid, event.claim, event.outcome
        if kind == "abandoned":
            return Alert(dataid, "abandoned", "its run died without ending: FAILED", None)
        if kind == "fenced":
            return Alert(dataid, "fenced", event.status, claim.runid)
        if event.status == "FAILED":
            if outcome.validation == "failed":
                where = _where(outcome.note, self.job.jobid, claim)
                return Alert(dataid, "validation failed", where, claim.runid)
            if self._last_try(dataid, claim.attempt):
                return Alert(
                    dataid, "FAILED", _where(outcome.note, self.job.jobid, claim), claim.runid
                )
        elif self._last_try(dataid, claim.attempt - 1, failed=True):
            return Alert(dataid, "recovered", "READY after FAILED", claim.runid)
        return None

    def _read(self, call):
        """``call()``, a read; again over a new session when the server ended this one
        while it idled (RunJob's, while its workers drain)."""
        try:
            return call()
        except Exception as exc:
            if not self.store.passing(exc):
                raise
        with self.store.transaction():  # the lost session is opened again first
            return call()

    def _last_try(self, dataid: str, attempt: int, failed: bool = False) -> bool:
        """Was this attempt (FAILED, if ``failed``) one with no retry left? A failure
        that is retried is no news, and neither is its recovery."""
        try:
            run = self._read(lambda: self.store.run_log(self.job.jobid, dataid, attempt))
        except Exception:  # the store failed: tell of a failure, keep quiet of a recovery
            return not failed
        if run is None:  # purged: it cannot be told
            return not failed
        if failed and run["status"] != "FAILED":
            return False
        return (run["retry"] or 0) >= self.job.settings.retries

    def kind(self) -> str:
        """The Apprise type of the message: the gravest of what was collected."""
        return max((KINDS.get(a.what, INFO) for a in self.alerts), key=GRAVITY.index, default=INFO)

    def message(self) -> tuple[str, str]:
        """The title and body of the one message for what was collected."""
        jobid, alerts = self.job.jobid, self.alerts
        place = f"job {jobid} on {address.host_name()}, store {shown(self.store.path)}"
        if len(alerts) == 1:
            (alert,) = alerts
            return f"dataflow: {jobid} {alert.dataid} {alert.what}", f"{alert.detail}\n{place}"
        kinds: dict[str, int] = {}
        for alert in alerts:
            kinds[alert.what] = kinds.get(alert.what, 0) + 1
        counts = ", ".join(f"{n} {what}" for what, n in kinds.items())
        alerts = sorted(alerts, key=lambda alert: natural_key(alert.dataid))
        lines = [f"{a.dataid}: {a.what}: {a.detail}" for a in alerts[:LISTED]]
        if len(alerts) > LISTED:
            lines.append(f"... and {len(alerts) - LISTED} more (utility status {jobid})")
        return f"dataflow: {jobid}: {counts}", "\n".join([*lines, place])

    def send(self) -> str | None:
        """Send what was collected, once; a warning line if it did not reach every URL
        (then also noted in the history of the runs concerned). Never raises."""
        if self._unread and not self._urls:
            return " ".join(self._unread.split())
        if not self.alerts or not self._urls:
            return None
        title, body = self.message()
        problem = failures(deliver(self._urls, title, body, self.kind()))
        runids = [a.runid for a in self.alerts if a.runid is not None]
        self.alerts = []
        if problem and problem != MISSING and runids:
            try:
                with self.store.transaction():
                    self.store.note_runs(runids, problem)
            except Exception:  # the store failed too: the warning still says it
                return f"{problem} (not recorded: the store failed)"
            return f"{problem} (recorded in the history)"
        return problem


def _where(note: str | None, jobid: str, claim) -> str:
    """Why a run failed (its reason: the job's last words), and where its log is read:
    on any host from the store, or its file on the host that ran it."""
    read = shlex.join(["utility", "log", jobid, claim.dataid])
    return f"{note or 'failed'}; log: {read} (any host), {claim.logpath} (this host)"


def test(urls: list[str], where: str) -> list[Delivery]:
    """``utility notify-test``: a test message to each URL."""
    body = f"A test alert from dataflow on {address.host_name()}, {where}."
    return deliver(urls, "dataflow: test alert", body)
