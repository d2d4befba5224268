"""Sum the JUnit XML reports of every tox environment into one line: ``N passed, N failed, N skipped``.

Usage: python3 scripts/totals.py JUNIT_DIR TOX_EXIT_STATUS
A failing environment that wrote no report (lint, type, a crash) counts as one failure.
The exit status is non-zero when anything failed.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main() -> int:
    """Print the totals line; return the exit status."""
    junit_dir, status = Path(sys.argv[1]), int(sys.argv[2])
    passed = failed = skipped = 0
    for report in sorted(junit_dir.glob("*.xml")):
        for suite in ET.parse(report).getroot().iter("testsuite"):
            tests = int(suite.get("tests", 0))
            bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            skip = int(suite.get("skipped", 0))
            passed += tests - bad - skip
            failed += bad
            skipped += skip
    if status != 0 and failed == 0:
        failed = 1  # an environment failed without a test report (lint, type, set-up)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or status else 0


if __name__ == "__main__":
    sys.exit(main())
