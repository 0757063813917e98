"""The `xlabench` command as a whole."""

from __future__ import annotations

import subprocess
import sys


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
