"""The ``hub`` plugin: Agent Skills (skill_*) and Aleph plugins from a package index (hub_*)."""

from __future__ import annotations

import aleph
from aleph_hub._config import HubConfig
from aleph_hub._consent import HubConsent
from aleph_hub._hub_tools import HubCatalogSearch, HubCatalogSync, HubFetchDocs, HubResolveSpec
from aleph_hub._install import HubInstallRun, HubInstallVerify
from aleph_hub._skill_manage import SkillManage
from aleph_hub._skill_tools import SkillInstall, SkillList, SkillRead, SkillStatus
from aleph_hub._state import HubState

ALEPH_PLUGIN_NAME = "hub"


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Register the skill and hub tools; they share one store under the data directory."""
    state = HubState(context.config.section("hub", HubConfig), context)

    context.add_cleanup(state.aclose)
    register(
        SkillList(state),
        SkillRead(state),
        SkillStatus(state),
        SkillInstall(state),
        SkillManage(state),
        HubCatalogSearch(state),
        HubCatalogSync(state),
        HubResolveSpec(state),
        HubInstallRun(state),
        HubInstallVerify(state),
        HubFetchDocs(state),
        HubConsent(),
    )
