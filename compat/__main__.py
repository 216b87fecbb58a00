import sys

from compat.tools.cli import main

sys.exit(main())
