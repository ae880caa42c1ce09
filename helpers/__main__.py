"""`python -m helpers build|notebooks|twins|pack|verify-rebuild`: see `helpers.build.cli`."""
import sys

from helpers.build.cli import main

sys.exit(main())
