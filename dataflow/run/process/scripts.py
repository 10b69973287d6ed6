"""What a job script is, checked before anything is claimed: its job's name (the file's
name) and the path to execute, with a clear error for a script that could not run (no
such file, a folder, not executable, a missing interpreter, not valid Python, not a
program at all)."""

from __future__ import annotations

import os

from ...errors import ScriptError


def job_name(script: str) -> str:
    """The jobid of a script: its file name without folder and extension."""
    # its last part, as Path(script).name: not a "." nor the empty one after a "/"
    name = next((part for part in reversed(script.split("/")) if part not in ("", ".")), "")
    stem, dot, _ = name.rpartition(".")
    return stem if dot and stem else name


def is_spark_job(script: str) -> bool:
    """A ``.py`` script is a PySpark job, run through ``spark-submit``. (Here, not in
    :mod:`..spark.sparksubmit`: a plain script's RunJob imports nothing of Spark.)"""
    return script.endswith(".py")


def resolve(script: str, submitted: bool = True) -> str:
    """The path to execute for ``script``; a clear error if it cannot run. ``submitted``:
    a ``.py`` script goes to spark-submit (a job); else it is executed (a ``--validate``)."""
    path = script
    if "/" not in script:
        from shutil import which  # only here: shutil costs ~3 ms of every RunJob's start

        path = f"./{script}" if os.path.exists(script) else which(script) or script
    if not os.path.exists(path):
        raise ScriptError(script, "no such file")
    if os.path.isdir(path):
        raise ScriptError(
            script, "it is a folder (RunJob --all FOLDER runs every job script in it)"
        )
    if submitted and is_spark_job(path):  # spark-submit reads it: need not be executable
        _check_python(script, path)
        return path
    if not os.access(path, os.X_OK):
        raise ScriptError(script, f"it is not executable (chmod +x {script})")
    _check_interpreter(script, path)
    return path


def _check_python(script: str, path: str) -> None:
    """A ``.py`` job that cannot be read or compiled would fail only inside spark-submit,
    after the claim and seconds of JVM start-up: say so now, nothing claimed."""
    try:
        with open(path, "rb") as file:
            source = file.read()
    except OSError as exc:
        raise ScriptError(script, f"it cannot be read: {exc.strerror or exc}") from None
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        raise ScriptError(script, f"it is not valid Python: {exc.msg}{where}") from None
    except ValueError as exc:  # a NUL byte in the source
        raise ScriptError(script, f"it is not valid Python: {exc}") from None


def _check_interpreter(script: str, path: str) -> None:
    """A "#!" line naming a program that is not there fails only at exec time, after the
    claim, with the script's own name in the error: say which file is missing, now. A
    file with no "#!" line runs as a program (ELF) or, if it is text, as a shell script
    (the seed's ``loadbob.sh``); anything else (random bytes, an image) would be fed to
    the shell and burn an attempt on garbage: refused now, nothing claimed."""
    try:
        with open(path, "rb") as file:
            head = file.read(4096)
    except OSError as exc:
        raise ScriptError(script, exc.strerror or str(exc)) from None
    first = head.split(b"\n", 1)[0][:256]
    if not first.startswith(b"#!"):
        if not head.startswith(b"\x7fELF") and not _is_text(head):
            raise ScriptError(
                script,
                "it is neither a program (ELF), a script with a '#!' line nor a text shell script",
            )
        return
    if first.endswith(b"\r"):  # the kernel would look for "/bin/sh\r"
        raise ScriptError(
            script, "its lines end in CR LF (Windows line ends): convert it (dos2unix)"
        )
    words = first[2:].split()
    interpreter = os.fsdecode(words[0]) if words else ""
    if interpreter.startswith("/") and not os.access(interpreter, os.X_OK):
        raise ScriptError(script, f"its interpreter {interpreter} (first line) is not there")
    if os.path.basename(interpreter) == "env":
        program = _env_program([os.fsdecode(word) for word in words[1:]])
        if program and not _on_path(program):
            raise ScriptError(
                script, f"its interpreter {program} (first line, through env) is not on PATH"
            )


def _env_program(words: list[str]) -> str | None:
    """The program a ``#!/usr/bin/env [-S] [NAME=VALUE...] PROGRAM`` line runs; None when
    its options are others (they may take values: not guessed at)."""
    for word in words:
        if word in ("-S", "-i", "-", "--") or ("=" in word and not word.startswith("-")):
            continue
        return None if word.startswith("-") else word
    return None


def _on_path(program: str) -> bool:
    """Can ``program`` be executed, as env would find it (a path, or a name on $PATH)?"""
    if "/" in program:
        return os.access(program, os.X_OK)
    folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return any(os.access(os.path.join(folder or ".", program), os.X_OK) for folder in folders)


def _is_text(head: bytes) -> bool:
    """Does a file that begins with ``head`` read as text (UTF-8, no NUL byte)?"""
    import codecs

    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # a cut character
    except UnicodeDecodeError:
        return False
    return b"\0" not in head
