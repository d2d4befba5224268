"""``python -m aleph`` runs the command line."""

import sys

from aleph._cli import main

sys.exit(main())
