//! The shared store's tables, who may write which rows, and the one command that changes them.
//!
//! Only `tacho store init` ([`init`]) runs DDL: it creates or migrates the schema, in one
//! transaction holding an advisory lock so two administrators at once migrate it once. Every
//! other connection only checks the version ([`check`]): a host needs no CREATE, and a
//! missing or older schema is one line saying to run `store init`.
//!
//! Row ownership is PostgreSQL's to enforce, not tacho's: every table a host writes has
//! row-level security, and each run and test row carries the role that inserted it
//! (`db_role`, filled by the server with `current_user`). A host role may read every row,
//! insert rows that are its own, and finish (update) its own runs; it cannot insert as another
//! role, update another role's rows, or delete at all. A machine id belongs to the first role
//! that records for it (`tacho_hosts`), and history rows (`tacho_intervals`,
//! `tacho_host_names`) are accepted only for a machine id of the inserting role, so one host
//! cannot write history in another's name. The administrator owns the tables, so row-level
//! security does not apply to it (`runs rm`, `store prune`).

use anyhow::{Result, anyhow};
use postgres::Client;

/// The advisory lock key migrations hold ("tachoSCH" in ASCII), so they never run twice at once.
const MIGRATION_LOCK: i64 = 0x7461_6368_6f53_4348;

/// Schema 1 of the shared store: the SQLite store's runs and tests, with the host-made UUID as
/// the identity of a run across hosts.
const PG_SCHEMA_1: &str = "
CREATE TABLE runs (
    id            BIGSERIAL PRIMARY KEY,
    uuid          UUID NOT NULL UNIQUE,
    created_at    TEXT NOT NULL,
    label         TEXT,
    kind          TEXT NOT NULL,
    status        TEXT NOT NULL,
    source        TEXT NOT NULL,
    tool_version  TEXT,
    suite_name    TEXT,
    suite_version BIGINT,
    hostname      TEXT,
    target_path   TEXT,
    host_json     TEXT NOT NULL,
    target_json   TEXT NOT NULL,
    extra_json    TEXT NOT NULL
);
CREATE INDEX runs_created ON runs(created_at);
CREATE INDEX runs_hostname ON runs(hostname);
CREATE TABLE tests (
    run_id   BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL,
    name     TEXT NOT NULL,
    rw       TEXT,
    bs_bytes BIGINT,
    iodepth  BIGINT,
    numjobs  BIGINT,
    json     TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// Schema 2: the process saving a `running` run (`boot-id pid start-ticks`), as in the SQLite
/// store, so a reader on that machine can tell a run whose process is gone.
const PG_SCHEMA_2: &str = "ALTER TABLE runs ADD COLUMN owner TEXT;";

/// Schema 3: least privilege and the fleet's history.
///
/// - Each run and test row records the role that inserted it; row-level security lets a role
///   insert and update only its own (`runs` and `tests` are read by all). Runs also keep the
///   machine id and labels of their host (from the host document) for selecting.
/// - `tacho_hosts` binds a machine id to the role that first recorded for it.
/// - `tacho_history`: one row per host and interval of `tacho record --db`, the interval's
///   findings and other figures as `jsonb` documents (findings apart: the fleet's question
///   reads only them, and most intervals have none), partitioned by day (UTC) so retention drops whole
///   partitions. Hosts cannot create tables: `tacho_history_partition(day)` (security
///   definer, owned by the administrator) creates a missing day's partition and nothing else.
const PG_SCHEMA_3: &str = "
ALTER TABLE runs ADD COLUMN db_role TEXT NOT NULL DEFAULT current_user;
ALTER TABLE runs ADD COLUMN machine_id TEXT;
ALTER TABLE runs ADD COLUMN labels JSONB NOT NULL DEFAULT '{}';
ALTER TABLE tests ADD COLUMN db_role TEXT NOT NULL DEFAULT current_user;
CREATE INDEX runs_machine ON runs(machine_id);
ALTER TABLE runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE tests ENABLE ROW LEVEL SECURITY;
CREATE POLICY read_all ON runs FOR SELECT USING (true);
CREATE POLICY insert_own ON runs FOR INSERT WITH CHECK (db_role = current_user);
CREATE POLICY update_own ON runs FOR UPDATE
    USING (db_role = current_user) WITH CHECK (db_role = current_user);
CREATE POLICY read_all ON tests FOR SELECT USING (true);
CREATE POLICY insert_own ON tests FOR INSERT WITH CHECK (
    db_role = current_user
    AND EXISTS (SELECT 1 FROM runs r WHERE r.id = run_id AND r.db_role = current_user));

CREATE TABLE tacho_hosts (
    machine_id TEXT PRIMARY KEY,
    db_role    TEXT NOT NULL DEFAULT current_user,
    first_seen TIMESTAMPTZ NOT NULL DEFAULT now()
);
ALTER TABLE tacho_hosts ENABLE ROW LEVEL SECURITY;
CREATE POLICY read_all ON tacho_hosts FOR SELECT USING (true);
CREATE POLICY insert_own ON tacho_hosts FOR INSERT WITH CHECK (db_role = current_user);

CREATE TABLE tacho_history (
    machine_id TEXT NOT NULL,
    hostname   TEXT NOT NULL,
    labels     JSONB NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    seconds    DOUBLE PRECISION NOT NULL,
    findings   JSONB NOT NULL,
    summary    JSONB NOT NULL,
    db_role    TEXT NOT NULL DEFAULT current_user,
    PRIMARY KEY (machine_id, at)
) PARTITION BY RANGE (at);
CREATE INDEX tacho_history_at ON tacho_history(at);
ALTER TABLE tacho_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY read_all ON tacho_history FOR SELECT USING (true);
CREATE POLICY insert_own ON tacho_history FOR INSERT WITH CHECK (
    db_role = current_user
    AND EXISTS (SELECT 1 FROM tacho_hosts h
                WHERE h.machine_id = tacho_history.machine_id AND h.db_role = current_user));

DO $do$ BEGIN EXECUTE format($f$
CREATE FUNCTION %1$I.tacho_history_partition(day DATE) RETURNS VOID
LANGUAGE plpgsql SECURITY DEFINER SET search_path = %1$I, pg_temp AS $body$
DECLARE
    name TEXT := 'tacho_history_' || to_char(day, 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(name));
    IF to_regclass(quote_ident(%1$L) || '.' || quote_ident(name)) IS NULL THEN
        EXECUTE format('CREATE TABLE %%I.%%I PARTITION OF %%I.tacho_history
                        FOR VALUES FROM (%%L) TO (%%L)',
                       %1$L, name, %1$L,
                       day::TIMESTAMP AT TIME ZONE 'UTC',
                       (day + 1)::TIMESTAMP AT TIME ZONE 'UTC');
    END IF;
END $body$;
REVOKE ALL ON FUNCTION %1$I.tacho_history_partition(DATE) FROM PUBLIC;
$f$, current_schema()); END $do$;
";

/// Schema 4: the history in compact rows (under half of schema 3's bytes).
///
/// - `tacho_intervals` (partitioned by day as before) keeps a host as the number `tacho_hosts`
///   gives its machine id, and its host name and labels as the number of a row of
///   `tacho_host_names` (one per host, name and labels seen), instead of the text in every
///   row; the figures Grafana plots as columns of their own; the findings as `jsonb` (`NULL`
///   when there are none, as in most intervals); the processes, services, devices and
///   interfaces as one `json` document of arrays (`[pid, comm, read, written, cpu_s]`, …).
///   `json` keeps the text as sent: `jsonb` stores every number as a `numeric` of 8 bytes or
///   more plus 4 of entry, twice the size here, and a row under 2 kB is never compressed.
/// - A block-range (BRIN) index on `at` finds a window (rows arrive in time order), and a
///   small index of the intervals with findings answers the fleet's question.
/// - `tacho_history` becomes a view of the same columns as before with the figures added, for
///   people and Grafana: `SELECT at, hostname, cpu_busy_pct FROM tacho_history WHERE …`.
/// - The rows of schema 3 move into the new table; roles that could insert history rows are
///   granted the new tables.
const PG_SCHEMA_4: &str = r#"
ALTER TABLE tacho_history RENAME TO tacho_history_v3;
INSERT INTO tacho_hosts (machine_id, db_role)
    SELECT DISTINCT ON (machine_id) machine_id, db_role FROM tacho_history_v3
    ORDER BY machine_id, at
    ON CONFLICT DO NOTHING;
ALTER TABLE tacho_hosts ADD COLUMN id INTEGER GENERATED ALWAYS AS IDENTITY UNIQUE;

CREATE TABLE tacho_host_names (
    id       INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host     INTEGER NOT NULL REFERENCES tacho_hosts (id),
    hostname TEXT NOT NULL,
    labels   JSONB NOT NULL,
    UNIQUE (host, hostname, labels)
);
ALTER TABLE tacho_host_names ENABLE ROW LEVEL SECURITY;
CREATE POLICY read_all ON tacho_host_names FOR SELECT USING (true);
CREATE POLICY insert_own ON tacho_host_names FOR INSERT WITH CHECK (
    EXISTS (SELECT 1 FROM tacho_hosts h
            WHERE h.id = tacho_host_names.host AND h.db_role = current_user));

CREATE TABLE tacho_intervals (
    host                INTEGER NOT NULL,
    names               INTEGER NOT NULL,
    at                  TIMESTAMPTZ NOT NULL,
    seconds             REAL NOT NULL,
    cpu_busy_pct        REAL,
    io_stall_pct        REAL,
    memory_stall_pct    REAL,
    available_bytes     BIGINT,
    device_write_bytes  BIGINT,
    process_write_bytes BIGINT,
    findings            JSONB,
    figures             JSON NOT NULL,
    PRIMARY KEY (host, at)
) PARTITION BY RANGE (at);
CREATE INDEX tacho_intervals_at ON tacho_intervals USING BRIN (at);
CREATE INDEX tacho_intervals_found ON tacho_intervals (at) WHERE findings IS NOT NULL;
ALTER TABLE tacho_intervals ENABLE ROW LEVEL SECURITY;
CREATE POLICY read_all ON tacho_intervals FOR SELECT USING (true);
CREATE POLICY insert_own ON tacho_intervals FOR INSERT WITH CHECK (
    EXISTS (SELECT 1 FROM tacho_host_names n JOIN tacho_hosts h ON h.id = n.host
            WHERE n.id = tacho_intervals.names AND n.host = tacho_intervals.host
              AND h.db_role = current_user));

DO $do$ BEGIN EXECUTE format($f$
CREATE OR REPLACE FUNCTION %1$I.tacho_history_partition(day DATE) RETURNS VOID
LANGUAGE plpgsql SECURITY DEFINER SET search_path = %1$I, pg_temp AS $body$
DECLARE
    name TEXT := 'tacho_intervals_' || to_char(day, 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(name));
    IF to_regclass(quote_ident(%1$L) || '.' || quote_ident(name)) IS NULL THEN
        EXECUTE format('CREATE TABLE %%I.%%I PARTITION OF %%I.tacho_intervals
                        FOR VALUES FROM (%%L) TO (%%L)',
                       %1$L, name, %1$L,
                       day::TIMESTAMP AT TIME ZONE 'UTC',
                       (day + 1)::TIMESTAMP AT TIME ZONE 'UTC');
    END IF;
END $body$;
$f$, current_schema()); END $do$;

INSERT INTO tacho_host_names (host, hostname, labels)
    SELECT DISTINCT h.id, o.hostname, o.labels
    FROM tacho_history_v3 o JOIN tacho_hosts h USING (machine_id)
    ON CONFLICT DO NOTHING;
SELECT tacho_history_partition(day)
    FROM (SELECT DISTINCT (at AT TIME ZONE 'UTC')::DATE AS day FROM tacho_history_v3) AS days;
INSERT INTO tacho_intervals
SELECT h.id, n.id, o.at, o.seconds,
       (o.summary->>'cpu_busy_pct')::REAL, (o.summary->>'io_stall_pct')::REAL,
       (o.summary->>'memory_stall_pct')::REAL, (o.summary->>'available_bytes')::BIGINT,
       (o.summary->>'device_write_bytes')::BIGINT, (o.summary->>'process_write_bytes')::BIGINT,
       NULLIF(o.findings, '[]'::JSONB),
       json_strip_nulls(json_build_object(
           'processes', (SELECT json_agg(json_build_array(e->'pid', e->'comm', e->'read_bytes',
                                                          e->'write_bytes', e->'cpu_s'))
                         FROM jsonb_array_elements(o.summary->'processes') e),
           'services', (SELECT json_agg(json_build_array(e->'path', e->'read_bytes',
                                                         e->'write_bytes'))
                        FROM jsonb_array_elements(o.summary->'services') e),
           'disks', (SELECT json_agg(json_build_array(e->'name', e->'display_name',
                                                      e->'read_bytes', e->'write_bytes',
                                                      e->'util_pct'))
                     FROM jsonb_array_elements(o.summary->'disks') e),
           'nets', (SELECT json_agg(json_build_array(e->'name', e->'rx_bytes', e->'tx_bytes'))
                    FROM jsonb_array_elements(o.summary->'nets') e),
           'exit_overruns', o.summary->'exit_overruns'))
FROM tacho_history_v3 o
JOIN tacho_hosts h USING (machine_id)
JOIN tacho_host_names n ON n.host = h.id AND n.hostname = o.hostname AND n.labels = o.labels;

CREATE VIEW tacho_history AS
SELECT h.machine_id, n.hostname, n.labels, i.at, i.seconds,
       coalesce(i.findings, '[]'::JSONB) AS findings, i.figures, i.cpu_busy_pct,
       i.io_stall_pct, i.memory_stall_pct, i.available_bytes, i.device_write_bytes,
       i.process_write_bytes
FROM tacho_intervals i
JOIN tacho_hosts h ON h.id = i.host
JOIN tacho_host_names n ON n.id = i.names;

DO $do$ DECLARE r TEXT; BEGIN
    FOR r IN SELECT DISTINCT a.grantee::REGROLE::TEXT
             FROM pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = 'tacho_history_v3'::REGCLASS AND a.privilege_type = 'INSERT'
               AND a.grantee <> c.relowner AND a.grantee <> 0 LOOP
        EXECUTE format('GRANT SELECT ON tacho_host_names, tacho_intervals, tacho_history TO %s;
                        GRANT INSERT ON tacho_host_names, tacho_intervals TO %s', r, r);
    END LOOP;
END $do$;
DROP TABLE tacho_history_v3;
"#;

/// Schema steps in order; the database records how many it has applied.
const PG_MIGRATIONS: &[&str] = &[PG_SCHEMA_1, PG_SCHEMA_2, PG_SCHEMA_3, PG_SCHEMA_4];

/// The schema version this tacho reads and writes.
pub const LATEST: i64 = PG_MIGRATIONS.len() as i64;

/// The tables a host role reads, and those it inserts into.
const READ: &str =
    "runs, tests, tacho_schema, tacho_hosts, tacho_host_names, tacho_intervals, tacho_history";
const INSERT: &str = "runs, tests, tacho_hosts, tacho_host_names, tacho_intervals";
/// The run columns a host updates when it finishes a run it saved test by test.
const UPDATE_RUNS: &str = "status, host_json, target_json, extra_json, hostname, target_path, \
                           machine_id, labels";

/// What `store init` did: the version before and after.
#[derive(Debug, PartialEq, Eq)]
pub struct Initialised {
    /// The version found (0: no schema).
    pub was: i64,
    /// The version now.
    pub now: i64,
}

/// Creates or migrates the schema to [`LATEST`] (`tacho store init`): the missing steps in one
/// transaction under an advisory lock. A schema newer than this tacho's is left alone.
pub fn init(client: &mut Client) -> Result<Initialised, postgres::Error> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS tacho_schema (version BIGINT NOT NULL)")?;
    let was: i64 = tx
        .query_opt("SELECT version FROM tacho_schema", &[])?
        .map_or(0, |r| r.get(0));
    if was >= LATEST {
        tx.commit()?;
        return Ok(Initialised { was, now: was });
    }
    for step in &PG_MIGRATIONS[was as usize..] {
        tx.batch_execute(step)?;
    }
    if was == 0 {
        tx.execute("INSERT INTO tacho_schema (version) VALUES ($1)", &[&LATEST])?;
    } else {
        tx.execute("UPDATE tacho_schema SET version = $1", &[&LATEST])?;
    }
    tx.commit()?;
    Ok(Initialised { was, now: LATEST })
}

/// Checks, without changing anything, that the schema is there and at least [`LATEST`]; the
/// error is one line saying to run `store init`.
pub fn check(client: &mut Client, shown: &str) -> Result<()> {
    let fix = "have its administrator run `tacho store init --db \
               postgres://ADMIN@HOST/DATABASE` (it prints the grants a host role needs)";
    let exists: bool = client
        .query_one("SELECT to_regclass('tacho_schema') IS NOT NULL", &[])
        .map_err(|e| anyhow!("shared store {shown}: {}", super::error_chain(&e)))?
        .get(0);
    if !exists {
        return Err(anyhow!(
            "the shared store {shown} has no tacho tables yet; {fix}"
        ));
    }
    let version: Option<i64> = client
        .query_opt("SELECT version FROM tacho_schema", &[])
        .map_err(|e| anyhow!("shared store {shown}: {}", super::error_chain(&e)))?
        .map(|r| r.get(0));
    match version {
        Some(v) if v >= LATEST => Ok(()),
        Some(v) => Err(anyhow!(
            "the shared store {shown} has schema version {v} and this tacho needs {LATEST}; {fix}"
        )),
        None => Err(anyhow!(
            "the shared store {shown} has no tacho tables yet; {fix}"
        )),
    }
}

/// The SQL an administrator runs to let `role` record and save runs: read everything, insert
/// its own rows, finish its own runs; no DDL, no delete.
pub fn grants(role: &str, schema: &str) -> String {
    let r = quote_ident(role);
    let s = quote_ident(schema);
    format!(
        "-- A host role may read every row, add rows of its own and finish its own runs; it\n\
         -- cannot change the tables, delete, or touch another role's rows (row-level security).\n\
         -- Create the role first (one per host, or per group of hosts), e.g.:\n\
         --   CREATE ROLE {r} LOGIN PASSWORD '...';\n\
         GRANT USAGE ON SCHEMA {s} TO {r};\n\
         GRANT SELECT ON {READ} TO {r};\n\
         GRANT INSERT ON {INSERT} TO {r};\n\
         GRANT UPDATE ({UPDATE_RUNS}) ON runs TO {r};\n\
         GRANT USAGE ON SEQUENCE runs_id_seq TO {r};\n\
         GRANT EXECUTE ON FUNCTION {s}.tacho_history_partition(DATE) TO {r};\n"
    )
}

/// `name` as an SQL identifier, in double quotes when it needs them.
fn quote_ident(name: &str) -> String {
    let plain = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    if plain {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_when_they_need_it() {
        assert_eq!(quote_ident("tacho_host"), "tacho_host");
        assert_eq!(quote_ident("Host-1"), "\"Host-1\"");
        assert_eq!(quote_ident("a\"; DROP"), "\"a\"\"; DROP\"");
        assert_eq!(quote_ident("1a"), "\"1a\"");
    }

    #[test]
    fn the_grants_never_give_ddl_or_delete() {
        let sql = grants("h", "public");
        for word in ["DELETE", "CREATE ON", "ALL", "TRUNCATE", "OWNER"] {
            assert!(!sql.contains(&format!("GRANT {word}")), "{sql}");
        }
    }
}
