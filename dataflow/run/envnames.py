"""Which environment variable names a row of the store may give a job.

The store is open to every client that can write it, and each ``job`` row's itemtype,
and each dataset's name (``<dataset>_hostname``...), becomes a variable of the job. A name
that changes how a process starts (its program search path, the dynamic loader), or how a
shell, an interpreter or the JVM starts (a file it sources, options it reads, where it
finds its modules), would let whoever writes a row run code on every host that runs the
job. Those names never come from the store.

The list starts from what ``sudo`` removes from every command's environment by default
(its ``env_delete`` table: ``IFS``, ``CDPATH``, ``LD_*``, ``ENV``, ``BASH_ENV``, ``PS4``,
``SHELLOPTS``, ``JAVA_TOOL_OPTIONS``, ``PERL5OPT``, ``PYTHONPATH``, ``RUBYOPT``...) and
what glibc's dynamic loader ignores for a setuid program (its ``UNSECURE_ENVVARS``:
``GCONV_PATH``, ``LOCPATH``, ``MALLOC_TRACE``, ``TMPDIR``...), widened to whole families
(every ``PYTHON*``, ``PERL*``, ``RUBY*``, ``JAVA*``), and adds what starts our own jobs:
``PATH``, Spark's launch variables (``SPARK_*``, ``PYSPARK_*``, ``HADOOP_CONF_DIR``...),
``NODE_OPTIONS``, ``GLIBC_TUNABLES``, and the toolkit's own (``DATAFLOW_*``, ``PASSKEY*``).
"""

from __future__ import annotations

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
    """May the store not give the job this variable? (Names are case-sensitive, as the
    programs that read them are.)"""
    return name in EXACT or name.startswith(PREFIXES)


def why(name: str) -> str:
    """A person's words for a refused name."""
    return (
        f"'{name}' changes how the job's programs start (a loader, shell, interpreter or "
        "JVM variable): it is never taken from the store (see docs/guarantees.md)"
    )
