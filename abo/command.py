"""``Command``: a shell-command objective (a simulation, a training script) run once per trial.

The template is split into arguments *before* parameters are filled in, and it runs without a
shell, so a parameter value can never inject a command: ``"python train.py --opt {opt}"`` with
``opt = "adam; rm -rf ~"`` passes one argument ``adam; rm -rf ~`` to ``train.py``. Each trial
runs in its own working directory holding ``params.json``, ``stdout.txt`` and ``stderr.txt``;
the parameters are also in the environment as ``ABO_PARAMS`` (JSON) and ``ABO_TRIAL_ID``.

The result is read from the last non-empty line of stdout, or, with ``result_file``, from a
JSON file the command writes in its working directory: a number (the value of a study's one
objective), or a JSON object of named outcomes (``{"error": 0.12, "latency_ms": 31}``; in a
study of one objective ``"value"`` names it too) whose other keys are kept as metadata. A
non-zero exit fails the trial with the tail of stderr.

Example:
    >>> cmd = Command("python -c 'print({x} ** 2)'", workdir="/tmp/abo-doc")
    >>> cmd({"x": 3.0})["value"]
    9.0
"""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from abo.exceptions import AboError, TrialFailure

STDERR_TAIL = 2000


def _failure(reason: str, files: Mapping[str, Any]) -> TrialFailure:
    """A ``TrialFailure`` that carries the trial's file paths as metadata."""
    exc = TrialFailure(reason)
    exc.metadata = dict(files)  # type: ignore[attr-defined]
    return exc


def _tail(path: Path, n: int = STDERR_TAIL) -> str:
    try:
        data = path.read_bytes()[-n:]
    except OSError:
        return ""
    return data.decode(errors="replace").strip()


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
    """

    accepts_trial = True

    def __init__(
        self,
        template: str,
        workdir: str | os.PathLike[str] = "abo-runs",
        result_file: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
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
        if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
            raise AboError(f"timeout: expected a positive number of seconds, got {timeout!r}")
        self.timeout = timeout
        self.env = dict(env or {})

    def __repr__(self) -> str:
        return f"Command({self.template!r})"

    def render(self, params: Mapping[str, Any]) -> list[str]:
        """The argument list for ``params`` (each placeholder filled inside one argument)."""
        try:
            return [arg.format(**params) for arg in self.argv]
        except KeyError as exc:
            raise AboError(f"command: placeholder {{{exc.args[0]}}} is not a parameter") from None
        except (IndexError, ValueError) as exc:
            raise AboError(f"command: bad placeholder in {self.template!r}: {exc}") from None

    def __call__(
        self, params: Mapping[str, Any], trial: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        trial = dict(trial or {})
        name = (
            f"trial-{trial['id']}-{trial.get('attempt', 0)}"
            if "id" in trial
            else f"run-{uuid.uuid4().hex[:8]}"
        )
        folder = self.workdir / str(trial.get("study", "study")) / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "params.json").write_text(json.dumps(dict(params)))
        stdout_path, stderr_path = folder / "stdout.txt", folder / "stderr.txt"
        env = {
            **os.environ,
            **self.env,
            "ABO_PARAMS": json.dumps(dict(params)),
            "ABO_TRIAL_ID": str(trial.get("id", "")),
            "ABO_WORKDIR": str(folder),
        }
        argv = self.render(params)
        files = {"workdir": str(folder), "stdout": str(stdout_path), "stderr": str(stderr_path)}
        start = time.time()
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            try:
                proc = subprocess.Popen(
                    argv, cwd=folder, env=env, stdout=out, stderr=err, start_new_session=True
                )
            except OSError as exc:
                raise _failure(f"command: cannot start {argv[0]!r}: {exc}", files) from None
            try:
                code = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise _failure("timeout", files) from None
            except BaseException:
                os.killpg(proc.pid, signal.SIGKILL)  # the worker is going away: no orphans
                proc.wait()
                raise
        if code != 0:
            tail = _tail(stderr_path)
            raise _failure(f"exit code {code}: {tail}" if tail else f"exit code {code}", files)
        try:
            if self.result_file is not None:
                path = folder / self.result_file
                if not path.exists():
                    raise TrialFailure(f"result_file: {self.result_file} was not written")
                result = _parse_value(path.read_text(), self.result_file)
            else:
                text = stdout_path.read_text(errors="replace")
                lines = [ln for ln in text.splitlines() if ln.strip()]
                if not lines:
                    raise TrialFailure("stdout: the command printed nothing (expected a value)")
                result = _parse_value(lines[-1], "stdout")
        except TrialFailure as exc:
            raise _failure(exc.reason, files) from None
        result.update(files, seconds=time.time() - start)
        return result
