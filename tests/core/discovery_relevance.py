# ruff: noqa: E501  (the catalog is a table: one tool per line reads best)
"""The reference's full builtin catalog (§3.1-§3.3) as tool definitions, and a labelled query set for tool_search.

Descriptions follow each tool's one-line purpose in the reference; parameters are plausible shapes so
that disclosure and search see realistic schemas. Queries are phrased the way a user or a model asks,
not copied from the descriptions. Used by tests/core/test_discovery_relevance.py and bench/bench_discovery.py.
"""

from __future__ import annotations

import functools
from typing import Any

from aleph import LoopTool, ToolDefinition, ToolFacts

__all__ = ["CATALOG", "QUERIES", "catalog_definitions", "catalog_tools"]

# name | description | param:type:description; ...
CATALOG = r"""
search | Search the web through the configured backends (Tavily, SearXNG, Brave) with a SERP fallback; returns titles, URLs and snippets. | query:string:What to look for on the internet; max_results:integer:How many results; provider:string:Backend to use
web_fetch | Fetch a URL over HTTP(S) and return the page as readable text. | url:string:The address to download; raw:boolean:Return the body unconverted
file_ops | File and directory operations in the workspace: list, search, stats, move, copy, delete, mkdir, batch_move, organize. | operation:string:list, search, stats, move, copy, delete, mkdir, batch_move or organize; path:string:Path operated on; destination:string:Target of move or copy; pattern:string:Glob for list or search
file_read | Read one file from the workspace, optionally a range of lines. | path:string:File to read; offset:integer:First line; limit:integer:Number of lines
file_write | Write one file in the workspace, creating or replacing its whole content. | path:string:File to write; content:string:The new content; create_dirs:boolean:Create parent folders
file_edit | Edit one file in place by replacing an exact piece of text with new text. | path:string:File to edit; old_string:string:Text to replace; new_string:string:Replacement text; replace_all:boolean:Replace every occurrence
apply_patch | Apply a multi-file patch in the V4A format (add, update, delete and move files in one change). | patch:string:The patch text starting with *** Begin Patch
bash | Run a shell command in the per-session sandbox workspace and return exit code, stdout and stderr. | command:string:The bash command line; timeout_seconds:number:Wall-time limit; working_dir:string:Directory to run in
code_exec | Run a code snippet (python, js or shell) in the sandbox and return its output. | language:string:python, javascript or shell; code:string:The program text; timeout_seconds:number:Wall-time limit
code_check | Lint or test the workspace (ruff, pytest and configured checks) and report failures. | checks:array:Which checks to run; paths:array:Files or folders to check
ctx_search | Search offloaded tool-result blobs: large outputs saved earlier in this session. | query:string:Text to find in saved tool outputs; limit:integer:How many matches
recall_events | Recall past session events: what tools ran, were approved or refused, and when. | session:string:Session key; kinds:array:Event kinds to include; limit:integer:How many events
pdf_generate | Turn text or markdown into a PDF document saved in the workspace. | content:string:Markdown or plain text; output_path:string:Where to save the PDF; title:string:Document title
image_generate | Generate an image from a text prompt with the configured image provider. | prompt:string:What the picture should show; size:string:Width x height; output_path:string:Where to save it
skill_list | List the skills available to the agent, including project skill directories. | source:string:Filter by where the skill comes from
skill_read | Read a skill file: its instructions, examples and resources. | name:string:Skill name; file:string:File inside the skill
gateway_route | Show routing information: which gateway, channel and agent a request is routed through. | channel:string:Channel id
desktop | Control the desktop: take screenshots, OCR the screen, read the UI, press keys and move or click the mouse. | action:string:screenshot, ocr, click, type, key, move or scroll; x:integer:Horizontal pixel position; y:integer:Vertical pixel position; text:string:Text to type
desktop_ax_query_focused | Query the accessibility tree for the focused window and element. | depth:integer:How many levels to return
desktop_ax_query_tree | Query the accessibility tree of an application window. | app:string:Application name; depth:integer:How many levels
desktop_ax_query_by_role | Find accessibility elements by role (button, text field, menu item) and name. | role:string:Accessibility role; name:string:Accessible name to match
desktop_ax_snapshot | Take a snapshot of the whole accessibility tree of the desktop. | max_nodes:integer:Node budget
desktop_som | Set-of-marks: number the clickable regions on a screenshot so they can be referred to. | region:string:Screen area to mark
desktop_gui_locate | Locate a GUI element on screen with a vision model from a description. | description:string:What the element looks like
desktop_check_permissions | Check that screen recording and accessibility permissions are granted for desktop control. |
read_config_guide | Read the configuration documentation: sections, keys and examples. | topic:string:Section or key to read about
config_audit | Audit the live configuration for risky, dead or conflicting settings. | scope:string:Section to audit
doctor | Run diagnostics on the installation; fix=true repairs what it can. | fix:boolean:Repair problems found; checks:array:Which diagnostics to run
select_model | Choose the language model the agent uses for this session. | model:string:Model identifier; provider:string:Provider name
list_models | List the language models available from the configured providers. | provider:string:Only this provider
self_manage | Daemon self-management: status, restart, update and logs of the running service. | action:string:status, restart, update or logs
hooks_manage | Manage extension hooks: list, enable, disable or add hook scripts. | action:string:list, enable, disable or add; hook:string:Hook name
plugin_manage | Manage plugins: list, install, enable, disable or remove them. | action:string:list, install, enable, disable or remove; plugin:string:Plugin name
self_config | Read or write the agent's own configuration (update_config, rollback_config). | action:string:read, update_config or rollback_config; config_path:string:Dotted key; value:string:New value
moa | Toggle mixture-of-agents: answer with several models and merge their replies. | enabled:boolean:Turn it on or off; models:array:Models to mix
vault_store | Store a secret (API key, password, token) in the encrypted vault; always asks for confirmation. | name:string:Secret name; value:string:Secret value
memory_search | Search personal memory for facts, preferences and past conversations. | query:string:What to recall; limit:integer:How many memories
memory_browse | Browse personal memory by category and recency. | category:string:Memory category; page:integer:Page number
memory_explore | Explore related memories around a topic through their links. | topic:string:Starting topic; depth:integer:How far to follow links
memory_timeline | Show memories on a timeline between two dates. | start:string:From date; end:string:To date
remember | Durably write a fact or preference into long-term memory. | content:string:What to remember; tags:array:Labels
node_list | List the cluster nodes (machines) connected to this center, with their tags and status. | tag:string:Only nodes with this tag
node_invoke | Run a bash command on one remote node of the cluster. | node:string:Node id; command:string:The command line
node_invoke_many | Fan a command out to every node with a tag and collect the results. | tag:string:Node tag; command:string:The command line
node_manage | Manage node membership: add, remove, pair or retag machines. | action:string:add, remove, pair or tag; node:string:Node id
agent_identity | Manage the agent's keys and signed ledger: rotate, revoke, verify, export. | action:string:rotate, revoke, verify or export
node_file | Move files between the center and a node: upload or download. | node:string:Node id; direction:string:push or pull; source:string:Source path; destination:string:Destination path
memory_reflect | Memory lifecycle: consolidate, decay and prune old memories. | action:string:consolidate, decay or prune
recall_context | Recall the context relevant to the current conversation from earlier sessions. | query:string:Topic
memory_trace | Trace the provenance of a memory: where and when it was learned. | memory_id:string:Memory identifier
note_graph_query | Query the knowledge wiki graph: notes and the links between them. | query:string:Graph query; limit:integer:How many nodes
governance_metrics | Audit probe: governance metrics about approvals, refusals and policy decisions. | window:string:Time window
tool_usage | Per-plugin and per-MCP-server tool usage counts. | since:string:Start of the window
note_orient | Orient in the knowledge wiki: overview of notes, hubs and recent changes. |
note_schema | Read or write SCHEMA.md, the structure rules of the knowledge wiki. | action:string:read or write; content:string:New schema text
user_profile | Read or update the user's profile: name, preferences, time zone. | action:string:read or update; field:string:Profile field; value:string:New value
session_complete | Mark the current session complete with a summary. | summary:string:What was achieved
flag_user_correction | Record a correction the user made so the agent does not repeat the mistake. | correction:string:What was wrong and the right answer
session_list | List the conversation sessions with their titles and last activity. | limit:integer:How many sessions
session_send | Send a message to another session or delegate a task to it. | session:string:Target session key; message:string:Text to send
session_new | Start a new conversation session. | title:string:Session title
session_compact | Compact the current session: summarise old turns to free context. | keep_last:integer:Turns to keep verbatim
session_rename | Rename a session. | session:string:Session key; title:string:New title
session_set_mode | Switch this session's mode: chat, work or code. | mode:string:chat, work or code
session_search | Search across the history of all sessions. | query:string:Text to find; limit:integer:How many hits
cron_manage | Manage scheduled cron jobs: create, list, update or delete timed tasks. | action:string:create, list, update or delete; schedule:string:Cron expression; task:string:What to run
heartbeat_list | List heartbeats: recurring check-ins the agent performs. |
heartbeat_create | Create a heartbeat: a recurring check-in with an interval and instructions. | interval:string:How often; instructions:string:What to check
heartbeat_update | Update a heartbeat's interval or instructions. | id:string:Heartbeat id; interval:string:How often; instructions:string:What to check
heartbeat_delete | Delete a heartbeat. | id:string:Heartbeat id
heartbeat_toggle | Pause or resume a heartbeat. | id:string:Heartbeat id; enabled:boolean:On or off
heartbeat_report | Heartbeat output gate: report the result of a check-in; notify messages the user. | status:string:ok or alert; notify:boolean:Message the user; message:string:Report text
agent_create | Create a new agent with its own name, model and instructions. | name:string:Agent name; model:string:Model; instructions:string:System prompt
agent_list | List the configured agents. |
agent_delete | Delete an agent (asks for confirmation). | name:string:Agent name
agent_switch | Switch the conversation to another agent. | name:string:Agent name
agent_unbind | Unbind an agent from a channel. | name:string:Agent name; channel:string:Channel id
agent_update | Update an agent's model, instructions or settings. | name:string:Agent name; model:string:Model; instructions:string:System prompt
agent_info | Show one agent's settings and status. | name:string:Agent name
workspace_manage | Manage workspace records: create, list, switch or archive workspaces. | action:string:create, list, switch or archive; name:string:Workspace name
canvas | A shared whiteboard: draw, write and arrange items visually. | action:string:draw, write, clear or export; content:string:What to put on it
browser_open | Open a URL in the browser in a new tab and return the page snapshot. | url:string:Web address; new_tab:boolean:Open in a new tab
browser_click | Click an element on the web page by its snapshot ref or a selector. | target:string:Element ref or selector; button:string:left, right or middle; double:boolean:Double click
browser_type | Type text into an input field of the web page. | target:string:Element ref or selector; text:string:Text to enter; submit:boolean:Press Enter afterwards
browser_screenshot | Take a screenshot of the browser page or of one element and save the image. | full_page:boolean:Capture the whole page; target:string:Element ref; path:string:Where to save the image
browser_snapshot | Return the page's accessibility snapshot with element refs to act on. | target:string:Subtree to snapshot; mode:string:full or delta
browser_navigate | Navigate the current tab: go to a URL, back, forward or reload. | url:string:Web address; action:string:goto, back, forward or reload
browser_tabs | List, open, switch to or close browser tabs. | action:string:list, new, select or close; index:integer:Tab index
browser_select | Choose an option in a dropdown select element. | target:string:Element ref; values:array:Options to select
browser_evaluate | Evaluate JavaScript in the page and return its result. | expression:string:JavaScript function or expression; target:string:Element to pass in
browser_fill_form | Fill several form fields at once: text boxes, checkboxes, radio buttons and selects. | fields:array:Field ref and value pairs
browser_press_key | Press a keyboard key or shortcut in the browser page. | key:string:Key name such as Enter, Tab or Control+A
browser_wait_for | Wait until text appears or disappears on the page, or for a number of seconds. | text:string:Text to wait for; text_gone:string:Text to wait to vanish; seconds:number:Time to wait
browser_exec | Run a batch of browser actions (navigate, click, type, fill) in one call. | steps:array:Actions to run in order; continue_on_error:boolean:Keep going after a failure
browser_console | Read the page's console messages and JavaScript errors. | level:string:Minimum level
browser_hover | Hover the mouse over an element of the page. | target:string:Element ref or selector
browser_scroll | Scroll the page or an element up or down. | direction:string:up or down; amount:integer:Pixels; target:string:Element to scroll
browser_pdf | Save the current web page as a PDF file. | path:string:Where to save; landscape:boolean:Orientation
browser_network | List the network requests the page made, with status codes. | filter:string:URL substring; include_bodies:boolean:Include response bodies
browser_dialog | Accept or dismiss a JavaScript alert, confirm or prompt dialog. | accept:boolean:Accept or dismiss; prompt_text:string:Answer for a prompt
browser_drag | Drag one element of the page and drop it on another. | source:string:Element to drag; target:string:Drop target
browser_upload | Upload files through a file input of the page. | paths:array:Files to upload; target:string:The file input
browser_resize | Resize the browser window or viewport. | width:integer:Width in pixels; height:integer:Height in pixels
browser_emulate | Emulate a device, geolocation, locale, color scheme or offline mode in the browser. | device:string:Device name such as iPhone 15; locale:string:Locale; geolocation:string:Latitude,longitude; offline:boolean:Simulate no network
browser_cookies | Get, set or clear the browser's cookies. | action:string:get, set or clear; name:string:Cookie name; value:string:Cookie value; domain:string:Cookie domain
browser_session | Save or restore the browser's logged-in session state (cookies and storage). | action:string:save or load; name:string:State name
browser_profile | Manage browser profiles: list, create or switch the profile in use. | action:string:list, create or use; name:string:Profile name
media_understand | Analyse a pasted image or audio clip with a multimodal model and describe it. | media:string:The image or audio reference; question:string:What to find out
audio_transcribe | Transcribe speech in an audio file to text. | path:string:Audio file; language:string:Spoken language
document_extract | Extract the text from a document such as a PDF, Word or spreadsheet file. | path:string:Document file; pages:string:Page range
hub_catalog_search | Search the Aleph Hub catalog for installable plugins and skills. | query:string:What to find
hub_catalog_sync | Sync the local copy of the Aleph Hub catalog. |
hub_resolve_spec | Resolve a Hub package spec to an exact version and its dependencies. | spec:string:Package spec
hub_install_run | Install a package from the Aleph Hub. | spec:string:Package spec
hub_install_verify | Verify an installed Hub package: signature and files. | name:string:Package name
hub_fetch_docs | Fetch the documentation of a Hub package over HTTP. | name:string:Package name
team_create | Create a team of agents to work on a goal together. | name:string:Team name; goal:string:What the team should achieve; members:array:Agents in the team
team_delegate | Delegate a piece of work to a team member. | team:string:Team name; member:string:Member; task:string:The work
team_status | Show the status of a team: members, tasks and progress. | team:string:Team name
team_disband | Disband a team (asks for confirmation). | team:string:Team name
team_set_protocol | Set the coordination protocol a team follows. | team:string:Team name; protocol:string:Protocol name
team_member_add | Add an agent to a team. | team:string:Team name; member:string:Agent to add
team_member_remove | Remove an agent from a team. | team:string:Team name; member:string:Agent to remove
team_digest | A digest of what a team did recently. | team:string:Team name
team_from_template | Create a team from a template. | template:string:Template name
team_snapshot | Snapshot a team's full state. | team:string:Team name
team_usage | Token and cost usage of a team. | team:string:Team name
team_workflow_canvas | Show a team's workflow as a canvas diagram. | team:string:Team name
message_send | Send a message to another agent of the team. | to:string:Recipient agent; text:string:Message
plan_submit | Submit a plan for review by the team lead. | plan:string:The plan
plan_resolve | Approve or reject a submitted plan. | plan_id:string:Plan id; approve:boolean:Decision
inbox_read | Read this agent's inbox of team messages (peek, count_only, mark_read). | peek:boolean:Leave messages unread; count_only:boolean:Only count
lifecycle_idle | Report that this agent is idle and waiting for work. |
lifecycle_request_shutdown | Ask to shut down an agent of the team. | agent:string:Agent to stop
lifecycle_resolve_shutdown | Approve or refuse a shutdown request. | request_id:string:Request id; approve:boolean:Decision
task_create | Create a task on the team's task board. | title:string:Task title; assignee:string:Who does it; description:string:Details
task_update | Update a task's status, assignee or details. | task_id:string:Task id; status:string:New status
task_list | List the tasks on the board with their status. | status:string:Filter by status
task_wait | Wait until a task finishes. | task_id:string:Task id; timeout_seconds:number:How long to wait
task_comment | Comment on a task. | task_id:string:Task id; text:string:Comment
team_acp_member | Add an external CLI coding agent to a team through ACP. | team:string:Team name; command:string:Agent command
workflow_step_review | Review one step of a workflow run. | run_id:string:Workflow run; step:string:Step id; approve:boolean:Decision
workflow | Start, inspect, pause, resume or cancel multi-step workflow runs. | action:string:start, status, pause, resume or cancel; workflow:string:Workflow name
task_submit | Submit the result of a task as an artifact. | task_id:string:Task id; artifact:string:The result
task_read_artifact | Read the artifact a task produced. | task_id:string:Task id
task_review | Review a submitted task result: accept or request changes. | task_id:string:Task id; accept:boolean:Decision; notes:string:Feedback
session_collaborate | Open a collaborative session shared between several agents or people. | participants:array:Who joins
session_turn | Take a turn in a collaborative session. | session:string:Session key; message:string:Your contribution
session_read | Read the transcript of a collaborative session. | session:string:Session key
channel_pairing | Pair a chat channel (Telegram, Slack, WhatsApp) with this agent. | channel:string:Channel type; code:string:Pairing code
google_meet | Join or speak in a Google Meet call through a bridge. | action:string:join, speak or leave; meeting_url:string:Meeting link
media_send | Send an image, audio or file to the chat channel. | path:string:File to send; caption:string:Caption
artifact_publish | Publish a deliverable to the artifact store and get a shareable link. | path:string:File to publish; title:string:Title
ask_user | Ask the human user one or more questions and wait for the answer. | questions:array:What to ask
skill_status | Show the status of installed skills: enabled, broken or outdated. | name:string:Skill name
skill_install | Install a skill from a package or a folder (operator only). | source:string:Package or path
skill_manage | Configure, enable, disable or remove skills (operator only). | action:string:enable, disable, configure or remove; name:string:Skill name
note_manage | Create, update, link or delete notes in the knowledge wiki. | action:string:create, update, link or delete; title:string:Note title; content:string:Note text
acp_delegate | Delegate a task to an external CLI agent (Claude Code, Codex, Gemini) over ACP. | agent:string:Which CLI agent; task:string:What to do
acp_switch | Switch which external CLI agent handles delegated work. | agent:string:CLI agent
a2a_delegate | Delegate a task to a remote agent over the A2A protocol. | agent:string:Remote agent; task:string:What to do
a2a_agents | List, add or remove remote A2A agents. | action:string:list, add or remove; url:string:Agent card URL
pim | Personal information management: contacts, calendar events and reminders. | action:string:contacts, calendar or reminders; query:string:What to find
system | System information: operating system, CPU, memory, disk and processes. | what:string:cpu, memory, disk or processes
automation | Create automations: triggers that run actions when something happens. | trigger:string:Event; action:string:What to do
permission | Show or request permissions for tools. | tool:string:Tool name
media | Send media to a channel. | path:string:File; channel:string:Channel
scratchpad | Scratchpad for the plan, objective and notes; request_approval leaves plan mode. | action:string:read, write or request_approval; content:string:Text
goal | Set and track the current goal and its success criteria. | goal:string:Objective; criteria:array:Success criteria
loop | Run a bounded loop of agent steps until a condition holds. | condition:string:Stop condition; max_iterations:integer:Limit
loop_graph | The governance graph of loops and their supervisors. | action:string:show or edit
strategy | Choose or revise the strategy for the current goal. | strategy:string:Approach
audio_generate | Generate music or sound from a text prompt. | prompt:string:Description of the sound; seconds:integer:Length
video_generate | Generate a short video clip from a text prompt. | prompt:string:Scene description; seconds:integer:Length
speech_generate | Text to speech: read text aloud in a chosen voice and save the audio. | text:string:What to say; voice:string:Voice name
channel_directory | Directory of known channels and contacts to message. | query:string:Name to look up
channel_message | Send a message to a person or group on a chat channel. | channel:string:Channel; to:string:Recipient; text:string:Message
channel_outbox | Show messages queued for delivery on channels. |
voice_mode_set | Turn voice mode on or off for the conversation. | enabled:boolean:Voice on or off
local_voice | Local voice input and output on this machine (microphone and speaker). | action:string:listen or speak
acp_session_control | Control a running external CLI agent session: interrupt, resume or stop. | action:string:interrupt, resume or stop; session:string:ACP session
subagent | Spawn a subagent with its own context to work on a subtask and return its answer. | task:string:The subtask; tools:array:Tools it may use
get_tool_schema | Load the full input schema of a tool whose parameters are collapsed. | tool_name:string:The exact tool name
tool_search | Search every available tool by what you want to do. | query:string:What you want to do; limit:integer:How many tools
mcp_read_resource | Read a resource from a connected MCP server by its URI. | server:string:Server id; uri:string:Resource URI
mcp_list_resources | List the resources connected MCP servers offer. | server:string:Server id
mcp_list_resource_templates | List the resource URI templates of connected MCP servers. | server:string:Server id
mcp_get_prompt | Get a prompt template from a connected MCP server, filled with arguments. | server:string:Server id; name:string:Prompt name; arguments:object:Prompt arguments
mcp_list_prompts | List the prompt templates connected MCP servers offer. | server:string:Server id
mcp_login | Log in to an MCP server that needs OAuth authorisation. | server:string:Server id
"""

# (query, the tool that should be found)
QUERIES: list[tuple[str, str]] = [
    ("look something up on the internet", "search"),
    ("download the contents of this link", "web_fetch"),
    ("show me what's inside config.yaml", "file_read"),
    ("create a new file called notes.txt with this text", "file_write"),
    ("replace the wrong import line in main.py", "file_edit"),
    ("rename a folder and move files around", "file_ops"),
    ("apply this diff touching several files", "apply_patch"),
    ("run ls -la in the terminal", "bash"),
    ("execute this python snippet", "code_exec"),
    ("run the linter and the unit tests", "code_check"),
    ("find that big tool output from earlier", "ctx_search"),
    ("which tools ran earlier in this session", "recall_events"),
    ("make a pdf out of this markdown report", "pdf_generate"),
    ("draw me a picture of a cat on a skateboard", "image_generate"),
    ("click the submit button", "browser_click"),
    ("type my email address into the login box", "browser_type"),
    ("capture an image of the web page", "browser_screenshot"),
    ("go back to the previous page", "browser_navigate"),
    ("close the second browser tab", "browser_tabs"),
    ("pick a value from the dropdown", "browser_select"),
    ("run some javascript on the site", "browser_evaluate"),
    ("press enter on the page", "browser_press_key"),
    ("wait until the text 'Done' shows up", "browser_wait_for"),
    ("see the javascript errors in the console", "browser_console"),
    ("scroll down the page", "browser_scroll"),
    ("save this website as a pdf", "browser_pdf"),
    ("which http requests did the page make", "browser_network"),
    ("dismiss the alert popup", "browser_dialog"),
    ("drag the card onto the done column", "browser_drag"),
    ("upload my resume through the file input", "browser_upload"),
    ("pretend to be an iPhone", "browser_emulate"),
    ("clear the cookies", "browser_cookies"),
    ("open https://example.com in the browser", "browser_open"),
    ("fill in the whole signup form", "browser_fill_form"),
    ("take a screenshot of my desktop and click on it", "desktop"),
    ("find the OK button by its accessibility role", "desktop_ax_query_by_role"),
    ("which window has focus right now", "desktop_ax_query_focused"),
    ("check screen recording permission", "desktop_check_permissions"),
    ("what did I tell you about my favourite food", "memory_search"),
    ("remember that I prefer dark mode", "remember"),
    ("show my memories from last week on a timeline", "memory_timeline"),
    ("where did you learn that fact", "memory_trace"),
    ("what is my time zone in my profile", "user_profile"),
    ("list my previous conversations", "session_list"),
    ("start a fresh conversation", "session_new"),
    ("summarise old turns to free up context", "session_compact"),
    ("switch to coding mode", "session_set_mode"),
    ("search all my past chats for the word invoice", "session_search"),
    ("schedule a job every monday at 9am", "cron_manage"),
    ("create a recurring check-in every hour", "heartbeat_create"),
    ("pause the heartbeat", "heartbeat_toggle"),
    ("make a new agent with its own model", "agent_create"),
    ("remove the old agent", "agent_delete"),
    ("install a plugin from the hub catalog", "hub_install_run"),
    ("spin up a team of agents for this project", "team_create"),
    ("add a task to the board for Bob", "task_create"),
    ("wait for the build task to finish", "task_wait"),
    ("check my inbox for team messages", "inbox_read"),
    ("send a message to the reviewer agent", "message_send"),
    ("transcribe this voice recording", "audio_transcribe"),
    ("get the text out of this Word document", "document_extract"),
    ("what is in this photo I pasted", "media_understand"),
    ("ask the user which option they want", "ask_user"),
    ("store my API key securely", "vault_store"),
    ("which language models can I use", "list_models"),
    ("diagnose and repair the installation", "doctor"),
    ("change a setting in your configuration", "self_config"),
    ("run a command on the build server node", "node_invoke"),
    ("copy a file to a remote node", "node_file"),
    ("delegate this coding task to Claude Code", "acp_delegate"),
    ("read it aloud with a British voice", "speech_generate"),
    ("make a short video of waves", "video_generate"),
    ("how much memory and disk does this machine have", "system"),
    ("add a meeting to my calendar", "pim"),
    ("join the google meet call", "google_meet"),
    ("publish the final report and give me a link", "artifact_publish"),
    ("rotate the signing keys", "agent_identity"),
    ("hand this subtask to a helper with its own context", "subagent"),
    ("read a resource from the MCP server", "mcp_read_resource"),
    ("log in to the github MCP server", "mcp_login"),
    ("install a new skill", "skill_install"),
    ("pair my Telegram account", "channel_pairing"),
    ("create a note in the wiki", "note_manage"),
    ("how many times was each tool used", "tool_usage"),
    ("load the full parameters of a collapsed tool", "get_tool_schema"),
    ("turn the microphone on and listen to me", "local_voice"),
    ("accept or reject the plan the worker sent", "plan_resolve"),
]


def _schema(spec: str) -> dict[str, Any]:
    """The JSON Schema a typed (pydantic) tool would publish: the first parameter required, the rest optional."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for index, part in enumerate(filter(None, (p.strip() for p in spec.split(";")))):
        name, kind, description = part.split(":", 2)
        prop: dict[str, Any] = {"type": kind}
        if kind == "string":
            prop["maxLength"] = 4096
        elif kind == "integer":
            prop.update(minimum=0, maximum=1_000_000)
        elif kind == "array":
            prop.update(items={"type": "string", "maxLength": 4096}, maxItems=100)
        if index == 0:
            required.append(name)
            properties[name] = {**prop, "description": description}
        else:
            properties[name] = {"anyOf": [prop, {"type": "null"}], "default": None, "description": description}
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in CATALOG.strip().splitlines():
        name, description, params = (p.strip() for p in line.split("|"))
        rows.append((name, description, params))
    return rows


@functools.cache
def catalog_tools() -> tuple[LoopTool, ...]:
    """One LoopTool per catalog entry (built once: schema checks are slow); each answers with its name and input."""
    tools = []
    for name, description, params in _rows():

        async def handler(data: dict[str, Any], _name: str = name) -> dict[str, Any]:
            return {"tool": _name, "input": data}

        tools.append(LoopTool(name, description, _schema(params), handler, facts=ToolFacts()))
    return tuple(tools)


def catalog_definitions() -> list[ToolDefinition]:
    """The catalog as definitions."""
    return [t.definition() for t in catalog_tools()]
