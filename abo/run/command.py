"""``Command``: a shell-command objective (a simulation, a training script) run once per trial.

The template is split into arguments *before* parameters are filled in, and it runs without a
shell, so a parameter value can never inject a command: ``"python train.py --opt {opt}"`` with
``opt = "adam; rm -rf ~"`` passes one argument ``adam; rm -rf ~`` to ``train.py``. Each trial
runs in its own working directory holding ``params.json``, ``stdout.txt`` and ``stderr.txt``;
the parameters are also in the environment as ``ABO_PARAMS`` (JSON) and ``ABO_TRIAL_ID``.
Those paths are predictable, so they are created without following links: a symbolic link
planted at one of them (or at the trial's folder), or a hard link to another file, fails the
trial instead of having abo write through it; a plain file left by an earlier run is replaced.

The result is read from the last non-empty line of stdout, or, with ``result_file``, from a
JSON file the command writes in its working directory: a number (the value of a study's one
objective), or a JSON object of named outcomes (``{"error": 0.12, "latency_ms": 31}``; in a
study of one objective ``"value"`` names it too) whose other keys are kept as metadata. A
non-zero exit fails the trial with the tail of stderr.

Intermediate values are report lines on stdout, read as they are printed (flush them)::

    abo:report <step> <value>

for example ``abo:report 3 0.4172`` after the third epoch: exactly that prefix, then two
finite numbers, nothing else on the line. Each goes to the study like ``trial.report`` and
is never taken for the result. When the study's stopping rule stops the trial, the command's
process group gets SIGTERM, and SIGKILL ``stop_grace`` seconds later if it is still there;
the trial's worker is free at once (the process ends in the background) and everything it
printed stays in ``stdout.txt``. A line that starts with ``abo:report`` but is not such a
line, or a report the study refuses (a step that goes backwards), fails the trial.

Example:
    >>> cmd = Command("python -c 'print({x} ** 2)'", workdir="/tmp/abo-doc")
    >>> cmd({"x": 3.0})["value"]
    9.0
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from abo.core.exceptions import AboError, TrialFailure
from abo.core.outcomes import finite_float, shown
from abo.run.command_files import STDERR_TAIL as STDERR_TAIL  # re-exported
from abo.run.command_files import _create, _open_folder, _Planted, _read, _tail

REPORT_PREFIX = b"abo:report"
_REPORT = re.compile(rb"^abo:report[ \t]+(\S+)[ \t]+(\S+)[ \t]*\r?$")


def _failure(reason: str, files: Mapping[str, Any]) -> TrialFailure:
    """A ``TrialFailure`` that carries the trial's file paths as metadata."""
    exc = TrialFailure(reason)
    exc.metadata = dict(files)  # type: ignore[attr-defined]
    return exc


def parse_report(line: bytes) -> tuple[float, float]:
    """``(step, value)`` of a report line (``abo:report <step> <value>``); ``ValueError``
    saying what is wrong otherwise."""
    match = _REPORT.match(line.rstrip(b"\n"))
    shown = line.decode(errors="replace").strip()[:200]
    if match is None:
        raise ValueError(f"malformed report {shown!r}: expected 'abo:report <step> <value>'")
    try:
        step, value = float(match[1]), float(match[2])
    except ValueError:
        raise ValueError(f"malformed report {shown!r}: step and value must be numbers") from None
    if not (math.isfinite(step) and math.isfinite(value)) or step < 0:
        raise ValueError(f"report {shown!r}: step and value must be finite, the step >= 0")
    return step, value


def _end(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM to the process group, SIGKILL after ``grace`` seconds if it is still there."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


class _Pump:
    """Copies the command's stdout to its file line by line, sending report lines to the
    trial as they come; on a stop (or a bad report) it ends the process in the background."""

    def __init__(self, proc: subprocess.Popen[bytes], out: Any, trial: Any, grace: float) -> None:
        self.proc, self.out, self.trial, self.grace = proc, out, trial, grace
        self.stopped = threading.Event()  # the study stopped the trial
        self.problem: str | None = None  # a report line or report that fails the trial
        self.ended = threading.Event()  # stdout reached its end
        self.reporting = hasattr(trial, "report")
        self.thread = threading.Thread(target=self._run, name="abo-command-stdout", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        assert self.proc.stdout is not None
        number = 0
        try:
            for line in self.proc.stdout:
                number += 1
                self.out.write(line)
                self.out.flush()
                if not line.startswith(REPORT_PREFIX) or self.stopped.is_set() or self.problem:
                    continue
                try:
                    step, value = parse_report(line)
                    stop = self.trial.report(step, value) if self.reporting else False
                except (ValueError, AboError) as exc:
                    self.problem = f"stdout line {number}: {exc}"
                    self._finish()
                    continue
                if stop:
                    self.stopped.set()
                    self._finish()
        finally:
            self.out.close()
            self.ended.set()

    def _finish(self) -> None:
        threading.Thread(target=_end, args=(self.proc, self.grace), daemon=True).start()


def _parse_value(text: str, source: str) -> dict[str, Any]:
    """What the command reported: a number (the value of a study's one objective), or a JSON
    object of named outcomes (and metadata: the study tells them apart, and fails the trial
    naming a missing or non-finite outcome)."""
    text = text.strip()
    try:
        parsed: Any = json.loads(text)
    except json.JSONDecodeError:
        msg = f"{source}: expected a number or a JSON object, got {text[:200]!r}"
        raise TrialFailure(msg) from None
    if isinstance(parsed, Mapping):
        return {str(k): v for k, v in parsed.items()}
    if isinstance(parsed, bool) or not isinstance(parsed, int | float):
        raise TrialFailure(f"{source}: value must be a number, got {parsed!r}")
    if not math.isfinite(parsed):
        raise TrialFailure(f"{source}: value must be finite, got {parsed!r}")
    return {"value": float(parsed)}


def _trial_files(
    params: Mapping[str, Any], folder: Path, folder_fd: int, files: Mapping[str, Any]
) -> tuple[int, int]:
    """Write ``params.json`` and create ``stdout.txt`` and ``stderr.txt`` in the trial's folder;
    return the stdout and stderr descriptors (a planted link fails the trial)."""
    try:
        with os.fdopen(_create(folder_fd, "params.json", folder), "w") as fh:
            fh.write(json.dumps(dict(params)))
        err_fd = _create(folder_fd, "stderr.txt", folder)
        try:
            out_fd = _create(folder_fd, "stdout.txt", folder)
        except _Planted:
            os.close(err_fd)
            raise
    except _Planted as exc:
        raise _failure(str(exc), files) from None
    return out_fd, err_fd


class Command:
    """A command-line objective; ``Command(template)(params)`` runs it and returns its value.

    Args:
        template: the command with ``{name}`` placeholders for parameters, e.g.
            ``"python train.py --lr {lr} --layers {layers}"`` (``{{`` and ``}}`` for literal
            braces, as in ``str.format``).
        workdir: where per-trial working directories are created (default ``./abo-runs``).
        result_file: read the value from this JSON file in the working directory instead of
            the last line of stdout.
        timeout: seconds before the command (and its process group) is killed; the trial
            then fails with reason ``timeout``.
        env: extra environment variables.
        stop_grace: seconds between SIGTERM and SIGKILL when the study stops the trial.
    """

    accepts_trial = True

    def __init__(
        self,
        template: str,
        workdir: str | os.PathLike[str] = "abo-runs",
        result_file: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stop_grace: float = 10.0,
    ) -> None:
        if not isinstance(template, str) or not template.strip():
            raise AboError("command: expected a non-empty command template")
        try:
            self.argv = shlex.split(template)
        except ValueError as exc:
            raise AboError(f"command: cannot split {template!r}: {exc}") from None
        self.template = template
        self.workdir = Path(workdir).absolute()
        self.result_file = result_file
        if timeout is not None and not ((t := finite_float(timeout)) is not None and t > 0):
            raise AboError(
                f"timeout: expected a finite number of seconds > 0, got {shown(timeout)}"
            )
        self.timeout = timeout
        self.env = dict(env or {})
        if not ((g := finite_float(stop_grace)) is not None and g >= 0):
            raise AboError(
                f"stop_grace: expected a finite number of seconds >= 0, got {shown(stop_grace)}"
            )
        self.stop_grace = float(stop_grace)

    def __repr__(self) -> str:
        return f"Command({self.template!r})"

    def render(self, params: Mapping[str, Any]) -> list[str]:
        """The argument list for ``params`` (each placeholder filled inside one argument)."""
        try:
            return [arg.format(**params) for arg in self.argv]
        except KeyError as exc:
            raise AboError(
                f"command: placeholder {{{exc.args[0]}}} is not a parameter of this trial (not "
                "in the space, or a conditional parameter inactive here)"
            ) from None
        except (IndexError, ValueError) as exc:
            raise AboError(f"command: bad placeholder in {self.template!r}: {exc}") from None

    def __call__(self, params: Mapping[str, Any], trial: Any = None) -> dict[str, Any]:
        """Run the command for ``params``; ``trial`` is the loop's ``TrialHandle`` (its reports
        reach the study) or a dict of ``study``, ``id``, ``attempt``."""
        trial = trial if trial is not None else {}
        trial_id = trial.get("id")
        name = (
            f"trial-{trial_id}-{trial.get('attempt', 0)}"
            if trial_id
            else f"run-{uuid.uuid4().hex[:8]}"
        )
        folder = self.workdir / str(trial.get("study", "study")) / name
        stdout_path, stderr_path = folder / "stdout.txt", folder / "stderr.txt"
        files = {"workdir": str(folder), "stdout": str(stdout_path), "stderr": str(stderr_path)}
        argv = self.render(params)
        try:
            folder_fd = _open_folder(folder)
        except _Planted as exc:
            raise _failure(str(exc), files) from None
        try:
            return self._run(params, trial, argv, folder, folder_fd, files)
        finally:
            os.close(folder_fd)

    def _run(
        self,
        params: Mapping[str, Any],
        trial: Any,
        argv: list[str],
        folder: Path,
        folder_fd: int,
        files: dict[str, str],
    ) -> dict[str, Any]:
        """Write the trial's files in its folder (``folder_fd``), run the command, read its
        result."""
        out_fd, err_fd = _trial_files(params, folder, folder_fd, files)
        env = {
            **os.environ,
            **self.env,
            "ABO_PARAMS": json.dumps(dict(params)),
            "ABO_TRIAL_ID": str(trial.get("id") or ""),
            "ABO_WORKDIR": str(folder),
        }
        start = time.time()
        code, pump = self._execute(argv, folder, env, out_fd, err_fd, trial, files, start)
        if pump.stopped.is_set():  # the process ends in the background; the worker is free
            return {**files, "stopped": True, "seconds": time.time() - start}
        pump.ended.wait(timeout=5.0)  # the last lines (a child may hold the pipe open)
        if pump.problem is not None:
            raise _failure(pump.problem, files)
        if code != 0:
            tail = _tail(folder_fd, "stderr.txt")
            raise _failure(f"exit code {code}: {tail}" if tail else f"exit code {code}", files)
        try:
            result = self._result(folder_fd)
        except TrialFailure as exc:
            raise _failure(exc.reason, files) from None
        result.update(files, seconds=time.time() - start)
        return result

    def _execute(
        self,
        argv: list[str],
        folder: Path,
        env: dict[str, str],
        out_fd: int,
        err_fd: int,
        trial: Any,
        files: dict[str, str],
        start: float,
    ) -> tuple[int | None, _Pump]:
        """Start the command in its own process group, pump its stdout, and wait for its exit
        code (``None`` when stopped); a timeout or an interruption kills the group."""
        out = os.fdopen(out_fd, "wb")
        with os.fdopen(err_fd, "wb") as err:
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=folder,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,
                )
            except OSError as exc:
                out.close()
                raise _failure(f"command: cannot start {argv[0]!r}: {exc}", files) from None
            pump = _Pump(proc, out, trial, self.stop_grace)
            deadline = None if self.timeout is None else start + self.timeout
            try:
                return self._wait(proc, pump, deadline), pump
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise _failure("timeout", files) from None
            except BaseException:
                os.killpg(proc.pid, signal.SIGKILL)  # the worker is going away: no orphans
                proc.wait()
                raise

    def _result(self, folder_fd: int) -> dict[str, Any]:
        """The command's result: ``result_file``, or the last line of stdout that is not a
        report (read without following a symbolic link the command may have left)."""
        if self.result_file is not None:
            try:
                data = _read(folder_fd, self.result_file)
            except FileNotFoundError:
                raise TrialFailure(f"result_file: {self.result_file} was not written") from None
            except OSError as exc:
                raise TrialFailure(
                    f"result_file: cannot read {self.result_file} ({exc.strerror}; a symbolic "
                    "link is not followed)"
                ) from None
            return _parse_value(data.decode(errors="replace"), self.result_file)
        try:
            text = _read(folder_fd, "stdout.txt").decode(errors="replace")
        except OSError as exc:  # the command replaced it (with a link: not followed)
            raise TrialFailure(f"stdout: cannot read stdout.txt ({exc.strerror})") from None
        lines = [
            ln
            for ln in text.splitlines()
            if ln.strip() and not ln.startswith(REPORT_PREFIX.decode())
        ]
        if not lines:
            raise TrialFailure("stdout: the command printed nothing (expected a value)")
        return _parse_value(lines[-1], "stdout")

    @staticmethod
    def _wait(proc: subprocess.Popen[bytes], pump: _Pump, deadline: float | None) -> int | None:
        """The exit code, or ``None`` as soon as the study stopped the trial or a report
        failed it (the process is being ended in the background then)."""
        while True:
            if pump.stopped.is_set():
                return None
            if pump.problem is not None:
                proc.wait()
                return proc.returncode
            wait = 0.05 if deadline is None else min(0.05, deadline - time.time())
            if wait <= 0:
                raise subprocess.TimeoutExpired(proc.args, 0)
            try:
                return proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
