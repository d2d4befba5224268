"""The teams store's schema, one text for SQLite and PostgreSQL (``{serial}``, ``{float}`` differ)."""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "migrations", "schema"]

SCHEMA_VERSION = 2
"""2: owners (``created_by``) and the chain they acted for (``acting_for``) on tasks, cron jobs and heartbeats;
workflows keyed by owner; artifacts' team."""

_TABLES = """
CREATE TABLE IF NOT EXISTS teams_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS teams (
    id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, description TEXT NOT NULL DEFAULT '',
    leader_id TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'active', protocol TEXT,
    budget TEXT NOT NULL DEFAULT '{{}}', created_at {float} NOT NULL, disbanded_at {float});
CREATE TABLE IF NOT EXISTS team_members (
    team_id TEXT NOT NULL REFERENCES teams(id), agent_id TEXT NOT NULL, role TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL DEFAULT 'agent', runner TEXT NOT NULL DEFAULT '', budget TEXT NOT NULL DEFAULT '{{}}',
    joined_at {float} NOT NULL, PRIMARY KEY (team_id, agent_id));
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, team_id TEXT, subject TEXT NOT NULL, description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'pending', owner TEXT, priority TEXT NOT NULL DEFAULT 'normal',
    result TEXT, metadata TEXT NOT NULL DEFAULT '{{}}', budget TEXT NOT NULL DEFAULT '{{}}',
    used_calls INTEGER NOT NULL DEFAULT 0, used_tokens BIGINT NOT NULL DEFAULT 0, used_cost {float} NOT NULL DEFAULT 0,
    steps INTEGER NOT NULL DEFAULT 0, created_at {float} NOT NULL, started_at {float}, completed_at {float},
    locked_by TEXT, locked_at {float}, created_by TEXT NOT NULL DEFAULT '', acting_for TEXT NOT NULL DEFAULT '[]');
CREATE INDEX IF NOT EXISTS tasks_by_team ON tasks (team_id, status);
CREATE TABLE IF NOT EXISTS task_dependencies (
    task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    depends_on TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE, PRIMARY KEY (task_id, depends_on));
CREATE TABLE IF NOT EXISTS task_runs (
    id TEXT PRIMARY KEY, task_id TEXT NOT NULL, agent_id TEXT NOT NULL, runner TEXT NOT NULL DEFAULT '',
    worker TEXT NOT NULL DEFAULT '', started_at {float} NOT NULL, ended_at {float},
    status TEXT NOT NULL DEFAULT 'running', summary TEXT, error TEXT,
    review_verdict TEXT, reviewer_kind TEXT, reviewer_id TEXT);
CREATE TABLE IF NOT EXISTS task_comments (
    id TEXT PRIMARY KEY, task_id TEXT NOT NULL, author TEXT NOT NULL, body TEXT NOT NULL, created_at {float} NOT NULL);
CREATE TABLE IF NOT EXISTS task_artifacts (
    id TEXT PRIMARY KEY, task_id TEXT NOT NULL, agent_id TEXT NOT NULL, artifact_type TEXT NOT NULL,
    title TEXT NOT NULL, content TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    metadata TEXT NOT NULL DEFAULT 'null', created_at {float} NOT NULL, team_id TEXT);
CREATE TABLE IF NOT EXISTS team_messages (
    seq {serial_pk}, id TEXT NOT NULL UNIQUE, team_id TEXT NOT NULL, from_agent TEXT NOT NULL,
    msg_type TEXT NOT NULL, subject TEXT NOT NULL, content TEXT NOT NULL, reply_to TEXT, thread_id TEXT,
    attachments TEXT NOT NULL DEFAULT '[]', created_at {float} NOT NULL, expires_at {float});
CREATE INDEX IF NOT EXISTS messages_by_thread ON team_messages (team_id, thread_id);
CREATE TABLE IF NOT EXISTS message_recipients (
    message_seq BIGINT NOT NULL, team_id TEXT NOT NULL, agent_id TEXT NOT NULL, role TEXT NOT NULL,
    read_at {float}, PRIMARY KEY (message_seq, agent_id));
CREATE INDEX IF NOT EXISTS recipients_unread ON message_recipients (team_id, agent_id, read_at, message_seq);
CREATE TABLE IF NOT EXISTS team_events (
    seq {serial_pk}, team_id TEXT NOT NULL, event_type TEXT NOT NULL, agent_id TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{{}}', created_at {float} NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_team ON team_events (team_id, created_at);
CREATE TABLE IF NOT EXISTS team_snapshots (
    id TEXT PRIMARY KEY, team_id TEXT NOT NULL, tag TEXT, note TEXT, created_at {float} NOT NULL,
    size_bytes INTEGER NOT NULL, payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS team_usage (
    seq {serial_pk}, team_id TEXT NOT NULL, agent_id TEXT NOT NULL, task_id TEXT,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0, cost {float} NOT NULL DEFAULT 0, calls INTEGER NOT NULL DEFAULT 0,
    created_at {float} NOT NULL);
CREATE TABLE IF NOT EXISTS workflows (
    owner TEXT NOT NULL, name TEXT NOT NULL, definition TEXT NOT NULL, updated_at {float} NOT NULL,
    PRIMARY KEY (owner, name));
CREATE TABLE IF NOT EXISTS workflow_runs (
    run_id TEXT PRIMARY KEY, name TEXT NOT NULL, team_id TEXT NOT NULL, steps TEXT NOT NULL,
    created_at {float} NOT NULL);
CREATE TABLE IF NOT EXISTS cron_jobs (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, prompt TEXT NOT NULL, schedule TEXT NOT NULL, agent_id TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1, missed TEXT NOT NULL DEFAULT 'run_once', next_run {float},
    running_until {float}, run_count INTEGER NOT NULL DEFAULT 0, last_run_at {float}, last_status TEXT, last_error TEXT,
    run_requested INTEGER NOT NULL DEFAULT 0, source_channel_id TEXT, source_conversation_id TEXT,
    created_at {float} NOT NULL, updated_at {float} NOT NULL, created_by TEXT NOT NULL DEFAULT '',
    acting_for TEXT NOT NULL DEFAULT '[]');
CREATE TABLE IF NOT EXISTS heartbeats (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, agent_id TEXT NOT NULL, enabled INTEGER NOT NULL DEFAULT 1,
    interval_ms BIGINT NOT NULL, probe TEXT NOT NULL, next_run {float}, running_until {float},
    last_probe_at {float}, last_probe_result TEXT, last_l2_at {float}, last_l2_status TEXT,
    consecutive_errors INTEGER NOT NULL DEFAULT 0, last_error TEXT, created_at {float} NOT NULL,
    updated_at {float} NOT NULL, created_by TEXT NOT NULL DEFAULT '', acting_for TEXT NOT NULL DEFAULT '[]');
CREATE TABLE IF NOT EXISTS schedule_runs (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, job_id TEXT NOT NULL, due_at {float} NOT NULL, started_at {float} NOT NULL,
    ended_at {float}, status TEXT NOT NULL, output TEXT, error TEXT, UNIQUE (kind, job_id, due_at));
"""

_DIALECTS = {
    "sqlite": {"serial_pk": "INTEGER PRIMARY KEY AUTOINCREMENT", "float": "REAL"},
    "postgres": {"serial_pk": "BIGSERIAL PRIMARY KEY", "float": "DOUBLE PRECISION"},
}


# From version 1: every stored object gets its owner. Rows written before owners existed are given to
# the agent they ran as (a schedule's agent, a task's owner) or to the default agent "main" (workflows),
# so an upgrade loses nothing; with no recorded chain they run as a guest (see aleph_teams._acting).
_TO_2 = """
ALTER TABLE tasks ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN acting_for TEXT NOT NULL DEFAULT '[]';
UPDATE tasks SET created_by = COALESCE(owner, 'main');
ALTER TABLE task_artifacts ADD COLUMN team_id TEXT;
ALTER TABLE cron_jobs ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE cron_jobs ADD COLUMN acting_for TEXT NOT NULL DEFAULT '[]';
UPDATE cron_jobs SET created_by = agent_id;
ALTER TABLE heartbeats ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE heartbeats ADD COLUMN acting_for TEXT NOT NULL DEFAULT '[]';
UPDATE heartbeats SET created_by = agent_id;
CREATE TABLE workflows_v2 (
    owner TEXT NOT NULL, name TEXT NOT NULL, definition TEXT NOT NULL, updated_at {float} NOT NULL,
    PRIMARY KEY (owner, name));
INSERT INTO workflows_v2 (owner, name, definition, updated_at)
    SELECT 'main', name, definition, updated_at FROM workflows;
DROP TABLE workflows;
ALTER TABLE workflows_v2 RENAME TO workflows
"""


def migrations(dialect: str, found: int) -> list[str]:
    """The statements that bring a database at schema ``found`` to :data:`SCHEMA_VERSION`."""
    if found >= 2:
        return []
    text = _TO_2.format(**_DIALECTS[dialect])
    return [s.strip() for s in text.split(";") if s.strip()]


def schema(dialect: str) -> list[str]:
    """The ``CREATE`` statements for ``dialect`` ("sqlite" or "postgres"), one per item."""
    text = _TABLES.format(**_DIALECTS[dialect])
    return [s.strip() for s in text.split(";") if s.strip()]
