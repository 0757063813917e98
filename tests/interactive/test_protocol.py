"""MLGO's interactive protocol through real FIFOs: a host written here from the wire format (not
xlabench's reader) drives `xlabench interactive`; `xlabench advise` serves a policy as `eval` rolls it out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from xlabench.cli import main
from xlabench.env import PassOrderingEnv
from xlabench.graphs import resolve_graphs
from xlabench.interactive.serve import DEFAULT_ENVIRONMENT
from xlabench.policies.artifact import resolve
from xlabench.xla import default_driver

GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"
XLABENCH = [sys.executable, "-m", "xlabench.cli"]
NUMPY_TYPES = {"float": np.float32, "double": np.float64, "int64_t": np.int64, "int32_t": np.int32}


class Host:
    """An MLGO host as LLVM's tools write one: FIFOs made, BASE.in opened for writing, then BASE.out."""

    def __init__(self, base: Path, graph: str, *options: str) -> None:
        for suffix in (".in", ".out"):
            os.mkfifo(f"{base}{suffix}")
        # A minute, not five, to wait for this host: a failed test leaves no compiler waiting long.
        timeout = [] if "--timeout" in options else ["--timeout", "60"]
        arguments = [*XLABENCH, "interactive", graph, "--channel-base", str(base), *timeout, *options]
        self.compiler = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.advice = open(f"{base}.in", "wb", buffering=0)  # noqa: SIM115 -- kept open across decisions
        self.log = open(f"{base}.out", "rb")  # noqa: SIM115
        self.header = json.loads(self.log.readline())
        self.actions: list[str] = self.header["actions"]
        self.context = json.loads(self.log.readline())["context"]

    def next_record(self) -> dict | None:
        """The next JSON line; for an observation, its features too (name -> array)."""
        line = self.log.readline()
        if not line:
            return None
        record = json.loads(line)
        if "observation" in record:
            record["features"] = {}
            for spec in self.header["features"]:
                dtype = np.dtype(NUMPY_TYPES[spec["type"]])
                size = int(np.prod(spec["shape"])) * dtype.itemsize
                record["features"][spec["name"]] = np.frombuffer(self.log.read(size), dtype)
            assert self.log.read(1) == b"\n"
        if "outcome" in record:
            spec = self.header["score"]
            record["score"] = float(np.frombuffer(self.log.read(4), np.float32)[0])
            assert spec["type"] == "float" and self.log.read(1) == b"\n"
        return record

    def advise(self, action: int) -> None:
        self.advice.write(np.array([action], dtype=np.int64).tobytes())

    def finish(self) -> tuple[int, str, str]:
        for stream in (self.advice, self.log):
            stream.close()
        out, err = self.compiler.communicate(timeout=300)
        return self.compiler.returncode, out, err


def play(host: Host, order: list[str]) -> list[dict]:
    """Advise `order`, then stop; every record the compiler sent."""
    records, step = [], 0
    while (record := host.next_record()) is not None:
        records.append(record)
        if "observation" in record:
            host.advise(host.actions.index(order[step]) if step < len(order) else -1)
            step += 1
    return records


@pytest.fixture
def channel(tmp_path) -> Path:
    return tmp_path / "channel"


@pytest.mark.parametrize("source", ["suite graph", "hlo file"])
def test_a_host_orders_passes_and_gets_evals_counts_for_its_sequence(channel, tmp_path, source):
    graph = resolve_graphs(GRAPH)[0]
    if source == "hlo file":
        path = tmp_path / "gru.hlo"
        path.write_text(graph.hlo_text())
    target = GRAPH if source == "suite graph" else str(tmp_path / "gru.hlo")
    order = ["algsimp", "cse", "dce"]
    host = Host(channel, target, "--json", str(tmp_path / "result.json"), "--score")
    assert host.header["advice"] == {"name": "advice", "type": "int64_t", "port": 0, "shape": [1]}
    names = [spec["name"] for spec in host.header["features"]]
    # The environment's observation (gymnasium orders its keys), then the action mask.
    assert names == ["action_counts", "cost", "element_types", "histogram", "op_count", "step_fraction",
                     "action_mask"]  # fmt: skip
    records = play(host, order)
    code, out, err = host.finish()
    assert code == 0, err
    assert host.context == (GRAPH if source == "suite graph" else "gru")
    observations = [record for record in records if "observation" in record]
    assert [record["observation"] for record in observations] == [0, 1, 2, 3]
    assert [record["outcome"] for record in records if "outcome" in record] == [0, 1, 2, 3]
    first = observations[0]["features"]
    assert first["op_count"][0] == 1.0 and first["step_fraction"][0] == 0.0
    # One mask entry an action; a pass whose required predecessor has not run yet is masked.
    assert len(first["action_mask"]) == len(host.actions) and first["action_mask"][host.actions.index("cse")]
    # What `xlabench eval` would report for this sequence: the driver's fair count after it, and D.
    driver = default_driver()
    module = driver.load(graph.hlo_text(), graph.name)
    start = module
    for name in order:
        module = driver.apply_pass(module, name)
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["sequence"] == order and result["R"] == driver.fair_op_count(module, order)
    assert result["D"] == driver.features(driver.run_default_pipeline(start)).op_count
    assert result["vs_default"] == result["D"] / result["R"] and f"R {result['R']}" in out


def test_advise_serving_general_gives_evals_rollout(channel, tmp_path, capsys):
    for graph in (GRAPH, "control_flow-cg-n16-b1-jacobi-f32"):
        base = tmp_path / graph
        out = tmp_path / f"{graph}.json"
        interactive = [*XLABENCH, "interactive", graph, "--policy", "general", "--channel-base", str(base),
                       "--json", str(out)]  # fmt: skip
        assert main(["advise", "--policy", "general", "--channel-base", str(base), "--", *interactive]) == 0
        served = json.loads(out.read_text())
        assert main(["eval", "--policy", "general", "--graphs", graph, "--no-runtime",
                     "--json", str(tmp_path / "eval.json")]) == 0  # fmt: skip
        (row,) = json.loads((tmp_path / "eval.json").read_text())["graphs"]
        assert (served["sequence"], served["R"], served["D"], served["calls"]) == (
            row["sequence"], row["R"], row["D"], row["calls"],
        )  # fmt: skip


def test_xla_order_in_the_features_names_xlas_next_pass_and_counts_its_compile(channel, tmp_path):
    host = Host(channel, GRAPH, "--observe-xla-order", "--json", str(tmp_path / "result.json"))
    names = [spec["name"] for spec in host.header["features"]]
    assert "xla_next" in names and "xla_progress" in names
    followed = []
    while (record := host.next_record()) is not None:
        if "observation" in record:
            features = record["features"]
            assert features["xla_next"].sum() == 1.0  # one-hot over the actions, then "done"
            nxt = int(np.argmax(features["xla_next"]))
            if nxt == len(host.actions) or len(followed) == 12:
                host.advise(-1)
            else:
                followed.append(host.actions[nxt])
                host.advise(nxt)
    code, _, err = host.finish()
    assert code == 0, err
    result = json.loads((tmp_path / "result.json").read_text())
    assert followed and result["sequence"] == followed
    # XLA's order costs one compile of the default pipeline, counted as `rollout` counts it: the
    # sequence's runs (a fixed point's each), the count's compile, the default pipeline's.
    env = PassOrderingEnv(graphs=GRAPH, **DEFAULT_ENVIRONMENT.replace(observe_xla_order=True).to_json())
    env.reset(seed=0)
    runs = sum(env.step(host.actions.index(name))[4]["calls"] for name in followed)
    assert result["calls"] == runs + 2


def test_interactive_with_a_policy_refuses_settings_it_was_not_made_with(channel, capsys):
    assert main(["interactive", GRAPH, "--policy", "general", "--max-steps", "3",
                 "--channel-base", str(channel)]) == 2  # fmt: skip
    _one_line_error(capsys.readouterr().err, "general was made with another --max-steps")


def _one_line_error(err: str, expected: str) -> None:
    lines = [line for line in err.splitlines() if line.startswith("xlabench: error")]
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in err, err


def test_advice_outside_the_actions_ends_the_episode_in_one_line(channel):
    host = Host(channel, GRAPH)
    assert "observation" in host.next_record()
    host.advise(len(host.actions) + 5)
    code, _, err = host.finish()
    assert code == 2
    _one_line_error(err, f"outside -1..{len(host.actions)}")


def test_masked_advice_ends_the_episode_in_one_line(channel):
    host = Host(channel, GRAPH)
    # A GRU has no Cholesky factorisation: the pass changes nothing, and is masked from then on.
    cholesky = host.actions.index("cholesky_expander")
    assert "observation" in host.next_record()
    host.advise(cholesky)
    record = host.next_record()
    assert record["features"]["action_mask"][cholesky] == 0
    host.advise(cholesky)
    code, _, err = host.finish()
    assert code == 2
    _one_line_error(err, "(cholesky_expander) at decision 1 is masked")


def test_a_host_that_closes_its_pipes_or_stays_silent_ends_the_episode(channel, tmp_path):
    host = Host(channel, GRAPH)
    host.next_record()
    code, _, err = host.finish()  # closes both ends without advising
    assert code == 2
    _one_line_error(err, "channel.in")
    silent = Host(tmp_path / "silent", GRAPH, "--timeout", "2")
    silent.next_record()
    started = time.monotonic()
    code, _, err = silent.compiler.wait(timeout=120), None, silent.compiler.stderr.read()
    assert code == 2 and time.monotonic() - started < 60
    _one_line_error(err, "nothing came within 2 s")
    silent.finish()


def test_advise_refuses_features_its_policy_cannot_take_and_stops_the_compiler(tmp_path, capsys):
    # A compiler that offers the wrong features, then waits for advice for ever.
    script = tmp_path / "compiler.py"
    script.write_text(
        "import json, sys\n"
        "inbound = open(sys.argv[1] + '.in', 'rb')\n"
        "outbound = open(sys.argv[1] + '.out', 'wb')\n"
        "spec = {'name': 'histogram', 'type': 'float', 'port': 0, 'shape': [7]}\n"
        "advice = {'name': 'advice', 'type': 'int64_t', 'port': 0, 'shape': [1]}\n"
        "outbound.write((json.dumps({'features': [spec], 'advice': advice}) + '\\n').encode())\n"
        "outbound.flush()\n"
        "inbound.read(8)\n"
    )
    base = tmp_path / "wrong"
    started = time.monotonic()
    code = main(["advise", "--channel-base", str(base), "--", sys.executable, str(script), str(base)])
    assert code == 2 and time.monotonic() - started < 60
    err = capsys.readouterr().err
    shipped = f"general@{resolve('general').name}"  # the version `advise` loads by default
    _one_line_error(err, f"{shipped} cannot take these features: action_counts missing")
