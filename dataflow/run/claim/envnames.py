"""Which environment variable names a row of the store may give a job: an allowlist.

The store is open to every client that can write it. A job's environment from its rows
is made of two kinds of names only:

- a dataset's variables, ``<datasetid>_<field>`` with fixed fields (``hostname``,
  ``database``, ..., each also upper-cased: :data:`.jobenv.FIELDS`), the dataset's name
  checked: letters, digits and ``_``; and none that starts a name which changes how a
  process, a shell, an interpreter or the JVM starts (the list below: ``LD`` would make
  ``LD_hostname``);
- a job row's own name (its itemtype), only if the host's policy allows it
  (``[env] allow``, :mod:`dataflow.policy`): a name no host listed is never set, however
  harmless it looks (``GIT_CONFIG_COUNT``, ``PAGER``, ``HTTPS_PROXY`` are not on any list
  of "dangerous" names a toolkit could keep up to date).

The list below is what ``sudo`` removes from every command's environment by default
(its ``env_delete`` table) and glibc's unsecure variables, widened to whole families, and
our own launch variables. It guards the dataset names only: a prefix of theirs must not
make a variable a program reads.
"""

from __future__ import annotations

from ...policy import Policy

EXACT = frozenset(
    [
        "IFS",
        "CDPATH",
        "ENV",
        "BASH_ENV",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "GLOBIGNORE",
        "PROMPT_COMMAND",
        "FPATH",
        "NULLCMD",
        "READNULLCMD",
        "ZDOTDIR",
        "TMPPREFIX",
        "PATH",
        "PATH_LOCALE",
        "SHELL",
        "HOME",
        "LOCALDOMAIN",
        "RES_OPTIONS",
        "HOSTALIASES",
        "NLSPATH",
        "GCONV_PATH",
        "GETCONF_DIR",
        "LOCPATH",
        "NIS_PATH",
        "RESOLV_HOST_CONF",
        "TMPDIR",
        "TZDIR",
        "GLIBC_TUNABLES",
        "TERMINFO",
        "TERMINFO_DIRS",
        "TERMPATH",
        "TERMCAP",
        "CLASSPATH",
        "NODE_OPTIONS",
        "NODE_PATH",
        "HADOOP_CONF_DIR",
        "HADOOP_HOME",
        "HADOOP_OPTS",
        "YARN_CONF_DIR",
        "HIVE_CONF_DIR",
        "LOG4J_CONFIGURATION_FILE",
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "KRB5_CONFIG",
        "KRB5CCNAME",
        "PASSKEY",
        "PASSKEY_FILE",
    ]
)
PREFIXES = (
    "LD_",
    "_RLD",
    "DYLD_",
    "MALLOC_",
    "BASH_FUNC_",
    "PYTHON",
    "PERL",
    "RUBY",
    "JAVA",
    "_JAVA_",
    "JDK_JAVA_",
    "SPARK_",
    "PYSPARK_",
    "DATAFLOW_",
)


def unsafe(name: str) -> bool:
    """Is this a variable that changes how a program starts? (Names are case-sensitive,
    as the programs that read them are.)"""
    return name in EXACT or name.startswith(PREFIXES)


def why(name: str) -> str:
    """A person's words for a refused dataset name."""
    return (
        f"'{name}' changes how the job's programs start (a loader, shell, interpreter or "
        "JVM variable): it is never taken from the store (see docs/guarantees.md)"
    )


def is_variable_name(name: str) -> bool:
    return name.isascii() and name.isidentifier()  # [A-Za-z_][A-Za-z0-9_]*, without re


def refusal(name: str, policy: Policy) -> str | None:
    """Why a job row named ``name`` may not give the job a variable here, or None."""
    if not is_variable_name(name):
        return f"'{name}' cannot be an environment variable (letters, digits and _)"
    if not policy.env_allowed(name):
        return policy.env_refusal(name)
    if unsafe(name) and name not in policy.env:  # allowed by a family (SPARK_*, *)
        return (
            f"'{name}' changes how the job's programs start: a host allows it only by its "
            f"exact name in [env] allow ({policy.where})"
        )
    return None
