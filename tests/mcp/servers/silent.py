"""A 'server' that reads its input and never answers (a hang)."""

import sys
import time

for _line in sys.stdin:
    time.sleep(0.01)
time.sleep(3600)
