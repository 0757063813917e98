"""xlabench as the host of MLGO's interactive protocol, serving a shipped policy (`xlabench advise`).

It makes the FIFOs `BASE.in` and `BASE.out`, starts COMMAND (a compiler that speaks the protocol and
opens them), reads the header, answers every observation with the policy's advice (its most likely
allowed action, as `xlabench eval` rolls it out) and exits with COMMAND's exit code. Features the
policy cannot take are refused in one line (exit 2) and COMMAND is terminated.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import numpy as np

from xlabench.errors import UserInputError
from xlabench.interactive.protocol import (
    ChannelClosed,
    Reader,
    TensorSpec,
    make_fifos,
    open_fifo,
    write_all,
)
from xlabench.interactive.serve import DEFAULT_TIMEOUT
from xlabench.policies.artifact import policies_directory
from xlabench.policies.policy import load_policy
from xlabench.settings import Settings, current
from xlabench.xla import default_driver


def advise(
    policy_name: str,
    channel_base: str,
    command: list[str],
    timeout: float = DEFAULT_TIMEOUT,
    settings: Settings | None = None,
) -> int:
    """Start the compiler `command`, advise it with the policy (from the policies directory of `settings`,
    default those in effect) until it closes its channel; its exit code. Features the policy cannot take,
    or a compiler that stopped listening: UserInputError."""

    if not command:
        raise UserInputError("advise needs the compiler to start: xlabench advise ... -- COMMAND ...")
    settings = settings or current()
    policy = load_policy(policy_name, default_driver(settings), policies_directory(settings))
    inbound_path, outbound_path = make_fifos(channel_base)
    try:
        process = subprocess.Popen(command)
    except OSError as error:
        raise UserInputError(f"{command[0]}: cannot start: {error.strerror}") from None
    alive = lambda: process.poll() is None  # noqa: E731
    descriptors: list[int] = []
    problem: Exception | None = None
    try:
        descriptors.append(open_fifo(inbound_path, "w", timeout, alive))
        descriptors.append(open_fifo(outbound_path, "r", timeout))
        observations = Reader(descriptors[1], str(outbound_path), timeout, alive)
        _serve(policy, observations, descriptors[0], str(inbound_path))
    except (ChannelClosed, _Refused) as error:
        problem = error
    except BaseException:
        _stop(process)  # whatever went wrong here, no compiler is left waiting for advice
        raise
    finally:
        for descriptor in descriptors:
            os.close(descriptor)  # the compiler reads the end of its advice, and can finish
    if problem is not None:
        killed = _stop(process)
        if killed or isinstance(problem, _Refused) or process.returncode == 0:
            raise UserInputError(f"advise: {problem}")
    code = process.wait()  # the compiler may go on compiling after its last decision: its own time
    return code if code >= 0 else 128 - code  # a compiler killed by a signal: the shell's convention


def _stop(process: subprocess.Popen[bytes], grace: float = 10.0) -> bool:
    """Terminate the compiler if it still runs (killed if it lingers past `grace` s); whether it ran."""
    if process.poll() is not None:
        return False
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return True


class _Refused(Exception):
    """What the compiler sent is not what the policy takes."""


def _serve(policy: Any, observations: Reader, advice_out: int, advice_name: str) -> None:
    """Read the header, then answer each observation until the compiler closes its channel."""
    line = observations.line()
    if line is None:
        raise ChannelClosed(f"{observations.name}: closed before its header")
    try:
        document = json.loads(line)
        features = [TensorSpec.from_json(value) for value in document["features"]]
        advice = TensorSpec.from_json(document["advice"])
        score = TensorSpec.from_json(document["score"]) if "score" in document else None
    except (ValueError, KeyError, TypeError) as error:
        raise _Refused(f"{observations.name}: not an MLGO header: {error}") from None
    _check(policy, features, advice, document.get("actions"))
    while (line := observations.line()) is not None:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise _Refused(f"{observations.name}: expected a JSON object line, got {line[:60]!r}")
        if "observation" in record:
            values = {spec.name: spec.decode(observations.exactly(spec.byte_size)) for spec in features}
            if observations.exactly(1) != b"\n":
                raise _Refused(
                    f"{observations.name}: observation {record['observation']} does not end its line"
                )
            mask = np.append(values.pop("action_mask").astype(bool), True)  # stopping is always allowed
            action = policy.act(values, mask)
            write_all(
                advice_out, advice.encode([-1 if action == len(policy.actions) else action]), advice_name
            )
        elif "outcome" in record and score is not None:
            observations.exactly(score.byte_size + 1)  # the score and its newline: the policy needs neither
        elif "context" not in record:
            raise _Refused(f"{observations.name}: unexpected line {line[:60]!r}")


def _check(policy: Any, features: list[TensorSpec], advice: TensorSpec, actions: Any) -> None:
    """Refuse, in one line, features, advice or actions the policy cannot take."""
    expected = {name: tuple(shape) for name, shape in policy.artifact.metadata["observation_spec"].items()}
    expected["action_mask"] = (len(policy.actions),)
    given = {spec.name: spec.shape for spec in features}
    if given != expected:
        differing = sorted(
            name for name in set(given) | set(expected) if given.get(name) != expected.get(name)
        )
        shown = ", ".join(f"{name} {list(given[name]) if name in given else 'missing'}" for name in differing)
        raise _Refused(f"{policy.label} cannot take these features: {shown} (it takes {expected})")
    if advice.type != "int64_t" or advice.shape not in ((1,), ()):
        raise _Refused(f"{policy.label} advises one int64_t, not {advice.type}{list(advice.shape)}")
    if actions is not None and (not isinstance(actions, list) or actions != list(policy.actions)):
        raise _Refused(f"{policy.label} was made with other actions than the compiler offers")
