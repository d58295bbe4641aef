"""`python -m recoup`: the `recoup` command (see `recoup.cli`), exiting with its status."""

import sys

from recoup.cli import main

sys.exit(main())
