"""The `xlabench` command as a whole."""

from __future__ import annotations

import json
import subprocess
import sys

import xlabench.cli.compilers as compilers_cli
from xlabench.cli import main
from xlabench.settings import current
from xlabench.xla.compilers.named_compilers import installed_compiler


def test_commands_leave_jax_to_the_compiler_workers(tmp_path):
    # Compiler work runs in isolated workers; the calling process never needs jax (nor pays its import).
    output = tmp_path / "out.hlo"
    script = (
        "import sys\n"
        "from xlabench.cli import main\n"
        f"graph, output = 'recurrent-gru-infer-l1-h128-s16-b8-f32', {str(output)!r}\n"
        "code = main(['apply', graph, 'algsimp', '-o', output])\n"
        "print(code, 'jax' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.stdout.split()[-2:] == ["0", "False"], result.stderr
    assert output.read_text().startswith("HloModule")


def test_a_handler_passes_the_resolved_settings_to_the_library(monkeypatch, capsys):
    # `--compiler` is resolved once, in `main`; the handler hands those very settings to the library.
    installed = installed_compiler()
    assert installed is not None
    monkeypatch.delenv("XLABENCH_COMPILER", raising=False)
    received = []
    real = compilers_cli.load_catalogue

    def recording(*arguments, **options):
        received.append((options.get("settings"), current()))
        return real(*arguments, **options)

    monkeypatch.setattr(compilers_cli, "load_catalogue", recording)
    before = current()
    assert main(["passes", "--json", "--compiler", installed.name]) == 0
    assert json.loads(capsys.readouterr().out)["action_sets"]
    [(settings, in_effect)] = received
    assert settings is in_effect and settings.compiler == installed.name
    assert current() == before  # in effect for the command only
