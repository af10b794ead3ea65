"""`python -m affinec ...` is the `affinec` command."""

import sys

from affinec.cli import main

sys.exit(main())
