"""Refuse network file systems: SQLite's WAL and flock only work on a local disk."""

from __future__ import annotations

import os

from ...errors import NetworkFilesystem

NETWORK = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "ceph", "glusterfs"}
    | {"lustre", "gpfs", "beegfs", "davfs", "coda", "ocfs2", "gfs2", "orangefs", "sshfs"}
)
MOUNTINFO = "/proc/self/mountinfo"


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_type(path: str, mountinfo: str = MOUNTINFO) -> str | None:
    """The file system type of the mount holding ``path``, or None if unknown."""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    target = os.path.realpath(path)
    best, best_type = "", None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        point = _unescape(fields[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, best_type = point, right.split()[0]
    return best_type


def require_local(folder: str, mountinfo: str = MOUNTINFO) -> None:
    """Raise :class:`NetworkFilesystem` when ``folder`` is on NFS, CIFS, FUSE and the like."""
    kind = mount_type(folder, mountinfo)
    if kind and (kind in NETWORK or kind.startswith("fuse")):
        raise NetworkFilesystem(str(folder), kind)
