"""`python -m affinec ...` is the `affinec` command."""

import sys

from affinec.tools.cli import main

sys.exit(main())
