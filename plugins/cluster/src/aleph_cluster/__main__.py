"""``python -m aleph_cluster init|issue|center-key|scheduler|node|crosscheck``."""

import sys

from aleph_cluster._cli import main

sys.exit(main())
