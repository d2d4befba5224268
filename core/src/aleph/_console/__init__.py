"""``aleph console``: a local web page with the approval inbox, the ledger and policy explain."""

from aleph._console._app import Console
from aleph._console._inbox import ConsoleInbox, PendingAsk

__all__ = ["Console", "ConsoleInbox", "PendingAsk"]
