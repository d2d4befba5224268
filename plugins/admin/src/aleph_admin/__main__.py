"""``python -m aleph_admin guide`` prints the configuration reference; ``verify-card FILE`` checks an identity card."""

from __future__ import annotations

import json
import sys

from aleph_admin._guide import config_guide
from aleph_admin._identity import verify_card


def main(argv: list[str]) -> int:
    """Run one command; exit 0 when it succeeded (a card verified), 1 otherwise."""
    if argv[:1] == ["guide"]:
        sys.stdout.write(config_guide())
        return 0
    if len(argv) == 2 and argv[0] == "verify-card":
        with open(argv[1], encoding="utf-8") as fh:
            data = json.load(fh)
        ok, why = verify_card(data.get("card", data))
        print(("valid: " if ok else "INVALID: ") + why)
        return 0 if ok else 1
    print("usage: python -m aleph_admin guide | verify-card CARD.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
