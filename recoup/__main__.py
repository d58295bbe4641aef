import sys

from recoup.cli import main

sys.exit(main())
