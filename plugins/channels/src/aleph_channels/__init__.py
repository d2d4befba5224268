"""aleph-channels: ask the human, pair new senders, send media, and reach Google Meet.

Adapters (IRC, e-mail, webhooks, or a plugin's own kind through :mod:`aleph_channels.hookspecs`) are
configured under ``[channel_adapters.<name>]``; the name is also the channel whose ``[channels.<name>]``
permission layer applies to requests from it. A host reads paired senders' messages with
``await channel_hub(rt).receive(agent)``.
"""

from aleph_channels._adapter import ChannelAdapter, ChannelUnavailable, Inbound, MediaLimits
from aleph_channels._hub import ChannelHub
from aleph_channels.plugin import channel_hub

__all__ = ["ChannelAdapter", "ChannelHub", "ChannelUnavailable", "Inbound", "MediaLimits", "channel_hub"]
