"""The ``channels`` plugin: adapters from ``[channel_adapters.<name>]``, the pairing store, and the tools."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

import aleph
from aleph import ConfigError
from aleph_channels import hookspecs
from aleph_channels._adapter import AdapterFactories, ChannelAdapter
from aleph_channels._ask import AskUser
from aleph_channels._config import EmailSettings, IrcSettings, MeetSettings, PairingSettings, WebhookSettings
from aleph_channels._email import EmailAdapter
from aleph_channels._hub import ChannelHub
from aleph_channels._irc import IrcAdapter
from aleph_channels._meet import GoogleMeet
from aleph_channels._pairing import PairingStore
from aleph_channels._tools import ChannelPairing, MediaSend
from aleph_channels._webhook import WebhookAdapter

__all__ = ["ALEPH_HOOKSPECS", "aleph_register_tools", "channel_hub"]

ALEPH_HOOKSPECS = (hookspecs,)


class _Adapters(BaseModel):
    model_config = ConfigDict(extra="allow")


def _typed(model: type[BaseModel], adapter: Callable[[str, Any], ChannelAdapter]) -> Callable[..., ChannelAdapter]:
    def factory(name: str, settings: Mapping[str, Any], data_dir: Path) -> ChannelAdapter:
        return adapter(name, model.model_validate(dict(settings)))

    return factory


def channel_hub(runtime: aleph.Aleph) -> ChannelHub:
    """The channel hub of ``runtime``: a host reads paired senders' messages with ``await hub.receive(agent)``."""
    entry = runtime.registry.get(AskUser.NAME)
    if entry is None or not isinstance(entry.tool, AskUser):
        raise LookupError("this runtime has no channels family loaded")
    return entry.tool.hub


def _build_adapters(context: aleph.PluginContext) -> tuple[dict[str, ChannelAdapter], dict[str, bool]]:
    factories = AdapterFactories()
    factories.register("irc", _typed(IrcSettings, IrcAdapter), "aleph-channels")
    factories.register("email", _typed(EmailSettings, EmailAdapter), "aleph-channels")
    factories.register("webhook", _typed(WebhookSettings, WebhookAdapter), "aleph-channels")
    for plugin, _ in context.call_hook(
        "aleph_channel_adapters", register=lambda kind, f: factories.register(kind, f, "a plugin")
    ):
        del plugin
    section = context.config.section("channel_adapters", _Adapters)
    adapters: dict[str, ChannelAdapter] = {}
    paired_only: dict[str, bool] = {}
    for name, raw in (section.model_extra or {}).items():
        key = f"channel_adapters.{name}"
        if not isinstance(raw, Mapping):
            raise ConfigError("must be a table", key=key)
        kind = raw.get("kind")
        if kind not in factories.factories:
            known = ", ".join(sorted(factories.factories))
            raise ConfigError(f"unknown adapter kind {kind!r} (known: {known})", key=f"{key}.kind")
        try:
            adapters[name] = factories.factories[kind](name, raw, context.data_dir / "channels" / name)
        except (ValidationError, ValueError) as exc:
            raise ConfigError(_first(exc) if isinstance(exc, ValidationError) else str(exc), key=key) from None
        paired_only[name] = bool(raw.get("paired_only", True))
    return adapters, paired_only


def _first(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Build the adapters and the pairing store, and register ask_user, channel_pairing, media_send, google_meet."""
    pairing_settings = context.config.section("channel_pairing", PairingSettings)
    meet_settings = context.config.section("google_meet", MeetSettings)
    adapters, paired_only = _build_adapters(context)
    store = PairingStore(
        context.data_dir / "channels" / "pairings.sqlite3",
        code_ttl_s=pairing_settings.code_ttl_s,
        pairing_ttl_s=pairing_settings.pairing_ttl_days * 86_400,
        max_pending=pairing_settings.max_pending,
    )
    hub = ChannelHub(adapters, store, paired_only=paired_only)

    async def close() -> None:
        await hub.close()
        store.close()

    context.add_cleanup(close)
    if any(a.can_receive for a in adapters.values()):
        context.add_service("adapters", hub.run)
    register(
        AskUser(hub),
        ChannelPairing(hub),
        MediaSend(hub, context.workspace, context.protected_paths),
        GoogleMeet(meet_settings),
    )
