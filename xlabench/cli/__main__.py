"""`python -m xlabench.cli`: the `xlabench` command."""

import sys

from xlabench.cli import main

sys.exit(main())
