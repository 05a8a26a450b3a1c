//! The fleet's history in the shared store: one compact row per host and interval of `tacho
//! record --db` (`tacho_intervals`, partitioned by day; the host and its name and labels as
//! numbers of `tacho_hosts` and `tacho_host_names`), written idempotently by (host, end of the
//! interval), and read back by window for `tacho top --db`. People and Grafana read the
//! `tacho_history` view of the same rows.

use super::{PgStore, error_chain};
use crate::history::interval::{COMPACT_TOP, COMPACT_TOP_CPU, Columns, Interval};
use anyhow::{Result, anyhow, bail};
use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One interval of one host as the recorder's backlog holds it until it is sent (the shared
/// store keeps it as [`Interval::columns`] makes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRow {
    /// The host's machine id.
    pub machine_id: String,
    /// Its host name then.
    pub hostname: String,
    /// Its labels then.
    pub labels: crate::labels::Labels,
    /// End of the interval, seconds since the Unix epoch.
    pub at_unix_s: f64,
    /// Length of the interval, seconds.
    pub seconds: f64,
    /// The interval's findings (a JSON array, usually empty).
    pub findings: serde_json::Value,
    /// The rest of the interval's figures (a JSON object).
    pub summary: serde_json::Value,
}

impl HistoryRow {
    /// The interval the row holds (`None` for a row this tacho cannot read).
    pub fn interval(&self) -> Option<Interval> {
        let mut doc = self.summary.clone();
        let o = doc.as_object_mut()?;
        o.insert("findings".into(), self.findings.clone());
        o.insert(
            "start_unix_s".into(),
            (self.at_unix_s - self.seconds).into(),
        );
        o.insert("end_unix_s".into(), self.at_unix_s.into());
        serde_json::from_value(doc).ok()
    }
}

/// Which hosts a fleet query reads.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    /// Host names (or machine ids) matching this pattern, `*` for any text.
    pub glob: Option<String>,
    /// Hosts whose labels hold all of these.
    pub labels: crate::labels::Labels,
}

impl Hosts {
    /// The pattern as SQL `LIKE` (`*` → `%`, `?` → `_`, the rest literal).
    fn like(&self) -> Option<String> {
        self.glob.as_ref().map(|g| {
            let mut out = String::new();
            for c in g.chars() {
                match c {
                    '*' => out.push('%'),
                    '?' => out.push('_'),
                    '%' | '_' | '\\' => {
                        out.push('\\');
                        out.push(c);
                    }
                    c => out.push(c),
                }
            }
            out
        })
    }
}

impl PgStore {
    /// Binds `machine_id` to this login role (the first role to record for a machine id owns
    /// it); fails when another role already does, since its history rows would be refused.
    pub fn claim_host(&mut self, machine_id: &str) -> Result<()> {
        let shown = self.shown.clone();
        let fail = |e: postgres::Error| anyhow!("shared store {shown}: {}", error_chain(&e));
        self.client
            .execute(
                "INSERT INTO tacho_hosts (machine_id) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&machine_id],
            )
            .map_err(fail)?;
        let row = self
            .client
            .query_one(
                "SELECT db_role, db_role = current_user
                        OR (SELECT rolbypassrls OR rolsuper FROM pg_roles
                            WHERE rolname = current_user)
                        OR (SELECT tableowner = current_user FROM pg_tables
                            WHERE tablename = 'tacho_intervals' AND schemaname = current_schema())
                 FROM tacho_hosts WHERE machine_id = $1",
                &[&machine_id],
            )
            .map_err(fail)?;
        let (owner, mine): (String, Option<bool>) = (row.get(0), row.get(1));
        if mine != Some(true) {
            bail!(
                "shared store {shown}: machine id {machine_id} is recorded by the role {}; \
                 record as that role (each host has a role of its own), or have the \
                 administrator remove the machine from tacho_hosts",
                crate::text::Escaped(&owner)
            );
        }
        Ok(())
    }

    /// Writes `rows` in one transaction, each once: a row whose host and end are already
    /// there (sent before a lost reply) is left as it is. Creates the day partitions they
    /// need, and the host and name rows they refer to. A row this tacho cannot read (a
    /// backlog entry of another version) is left out. Returns how many were new.
    pub fn ship(&mut self, rows: &[HistoryRow]) -> Result<u64, postgres::Error> {
        let mut tx = self.client.transaction()?;
        // The numbers of each (machine id, host name, labels) the rows carry.
        let mut ids: HashMap<(&str, &str, String), (i32, i32)> = HashMap::new();
        let mut cols = Vec::with_capacity(rows.len());
        for r in rows {
            let Some(interval) = r.interval() else {
                continue;
            };
            let interval = interval.compact(COMPACT_TOP, COMPACT_TOP_CPU);
            let labels = serde_json::to_string(&r.labels).unwrap_or_else(|_| "{}".into());
            let key = (r.machine_id.as_str(), r.hostname.as_str(), labels);
            let id = match ids.get(&key) {
                Some(&id) => id,
                None => {
                    let id = Self::host_ids(&mut tx, key.0, key.1, &key.2)?;
                    ids.insert(key, id);
                    id
                }
            };
            cols.push((id, interval.columns()));
        }
        let at: Vec<f64> = cols.iter().map(|(_, c)| c.end_unix_s).collect();
        // The days as the server rounds the times (to the microsecond) and files them.
        tx.execute(
            "SELECT tacho_history_partition(day) FROM (
                 SELECT DISTINCT (to_timestamp(a) AT TIME ZONE 'UTC')::DATE AS day
                 FROM unnest($1::FLOAT8[]) AS a) AS days",
            &[&at],
        )?;
        let host: Vec<i32> = cols.iter().map(|((h, _), _)| *h).collect();
        let names: Vec<i32> = cols.iter().map(|((_, n), _)| *n).collect();
        let seconds: Vec<f32> = cols.iter().map(|(_, c)| c.seconds).collect();
        let real = |f: fn(&Columns) -> Option<f32>| -> Vec<Option<f32>> {
            cols.iter().map(|(_, c)| f(c)).collect()
        };
        let big = |f: fn(&Columns) -> Option<i64>| -> Vec<Option<i64>> {
            cols.iter().map(|(_, c)| f(c)).collect()
        };
        let findings: Vec<Option<&str>> = cols.iter().map(|(_, c)| c.findings.as_deref()).collect();
        let figures: Vec<&str> = cols.iter().map(|(_, c)| c.figures.as_str()).collect();
        // One statement per batch: the rows as arrays, unnested by the server.
        let new = tx.execute(
            "INSERT INTO tacho_intervals (host, names, at, seconds, cpu_busy_pct, io_stall_pct,
                                          memory_stall_pct, available_bytes, device_write_bytes,
                                          process_write_bytes, findings, figures)
             SELECT h, n, to_timestamp(a), s, c, i, m, av, dw, pw, f::JSONB, d::JSON
             FROM unnest($1::INT4[], $2::INT4[], $3::FLOAT8[], $4::FLOAT4[], $5::FLOAT4[],
                         $6::FLOAT4[], $7::FLOAT4[], $8::INT8[], $9::INT8[], $10::INT8[],
                         $11::TEXT[], $12::TEXT[])
                  AS u(h, n, a, s, c, i, m, av, dw, pw, f, d)
             ON CONFLICT (host, at) DO NOTHING",
            &[
                &host,
                &names,
                &at,
                &seconds,
                &real(|c| c.cpu_busy_pct),
                &real(|c| c.io_stall_pct),
                &real(|c| c.memory_stall_pct),
                &big(|c| c.available_bytes),
                &big(|c| c.device_write_bytes),
                &big(|c| c.process_write_bytes),
                &findings,
                &figures,
            ],
        )?;
        tx.commit()?;
        Ok(new)
    }

    /// The numbers of a machine id (`tacho_hosts`) and of its host name and labels
    /// (`tacho_host_names`), made when they are new.
    fn host_ids(
        tx: &mut postgres::Transaction<'_>,
        machine_id: &str,
        hostname: &str,
        labels: &str,
    ) -> Result<(i32, i32), postgres::Error> {
        tx.execute(
            "INSERT INTO tacho_hosts (machine_id) VALUES ($1) ON CONFLICT DO NOTHING",
            &[&machine_id],
        )?;
        let host: i32 = tx
            .query_one(
                "SELECT id FROM tacho_hosts WHERE machine_id = $1",
                &[&machine_id],
            )?
            .get(0);
        tx.execute(
            "INSERT INTO tacho_host_names (host, hostname, labels)
             VALUES ($1, $2, $3::TEXT::JSONB) ON CONFLICT DO NOTHING",
            &[&host, &hostname, &labels],
        )?;
        let names: i32 = tx
            .query_one(
                "SELECT id FROM tacho_host_names
                 WHERE host = $1 AND hostname = $2 AND labels = $3::TEXT::JSONB",
                &[&host, &hostname, &labels],
            )?
            .get(0);
        Ok((host, names))
    }

    /// Whether the connection is gone (the server stopped or the network dropped it).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// The intervals of the host with `machine_id` ending in `from..=to`, oldest first.
    pub fn host_intervals(
        &mut self,
        from: f64,
        to: f64,
        machine_id: &str,
    ) -> Result<Vec<Interval>> {
        let shown = self.shown.clone();
        let rows = self
            .client
            .query(
                "SELECT extract(epoch FROM i.at)::FLOAT8, i.seconds, i.cpu_busy_pct,
                        i.io_stall_pct, i.memory_stall_pct, i.available_bytes,
                        i.device_write_bytes, i.process_write_bytes, i.findings::TEXT,
                        i.figures::TEXT
                 FROM tacho_intervals i JOIN tacho_hosts h ON h.id = i.host
                 WHERE h.machine_id = $1 AND i.at > to_timestamp($2) AND i.at <= to_timestamp($3)
                 ORDER BY i.at",
                &[&machine_id, &from, &to],
            )
            .map_err(|e| failed(&shown, e))?;
        rows.iter()
            .map(|r| {
                let c = Columns {
                    end_unix_s: r.get(0),
                    seconds: r.get(1),
                    cpu_busy_pct: r.get(2),
                    io_stall_pct: r.get(3),
                    memory_stall_pct: r.get(4),
                    available_bytes: r.get(5),
                    device_write_bytes: r.get(6),
                    process_write_bytes: r.get(7),
                    findings: r.get(8),
                    figures: r.get(9),
                };
                Interval::from_columns(&c).map_err(|e| {
                    anyhow!(
                        "shared store {shown}: the interval of {} ending {} does not read: {e}",
                        crate::text::Escaped(machine_id),
                        c.end_unix_s
                    )
                })
            })
            .collect()
    }

    /// The intervals with findings of the hosts `hosts` selects, ending in `from..=to`, by
    /// host then time, each handed to `each` with its host's machine id; they hold only
    /// their times and findings.
    pub fn findings_each(
        &mut self,
        from: f64,
        to: f64,
        hosts: &Hosts,
        mut each: impl FnMut(String, Interval) -> Result<()>,
    ) -> Result<()> {
        let shown = self.shown.clone();
        let labels = serde_json::to_string(&hosts.labels)?;
        let like = hosts.like();
        let sql = "SELECT h.machine_id, extract(epoch FROM i.at)::FLOAT8, i.seconds,
                          i.findings::TEXT
                   FROM tacho_intervals i
                   JOIN tacho_hosts h ON h.id = i.host
                   JOIN tacho_host_names n ON n.id = i.names
                   WHERE i.findings IS NOT NULL
                     AND i.at > to_timestamp($1) AND i.at <= to_timestamp($2)
                     AND n.labels @> $3::TEXT::JSONB
                     AND ($4::TEXT IS NULL OR n.hostname LIKE $4 OR h.machine_id LIKE $4)
                   ORDER BY h.machine_id, i.at";
        let params: [&(dyn postgres::types::ToSql + Sync); 4] = [&from, &to, &labels, &like];
        let mut rows = self
            .client
            .query_raw(sql, params.iter().copied())
            .map_err(|e| failed(&shown, e))?;
        while let Some(r) = rows.next().map_err(|e| failed(&shown, e))? {
            let (end, seconds): (f64, f32) = (r.get(1), r.get(2));
            let findings = r
                .get::<_, Option<&str>>(3)
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or_default();
            each(
                r.get(0),
                Interval {
                    start_unix_s: end - crate::history::interval::widen(seconds),
                    end_unix_s: end,
                    findings,
                    ..Interval::default()
                },
            )?;
        }
        Ok(())
    }

    /// The hosts `hosts` selects that recorded an interval ending in `from..=to`, without
    /// counting them: (machine id, host name).
    pub fn history_hosts_named(
        &mut self,
        from: f64,
        to: f64,
        hosts: &Hosts,
    ) -> Result<Vec<(String, String)>> {
        let shown = self.shown.clone();
        let labels = serde_json::to_string(&hosts.labels)?;
        let like = hosts.like();
        let rows = self
            .client
            .query(
                "SELECT h.machine_id, max(n.hostname)
                 FROM tacho_hosts h JOIN tacho_host_names n ON n.host = h.id
                 WHERE n.labels @> $3::TEXT::JSONB
                   AND ($4::TEXT IS NULL OR n.hostname LIKE $4 OR h.machine_id LIKE $4)
                   AND EXISTS (SELECT 1 FROM tacho_intervals i
                               WHERE i.host = h.id AND i.names = n.id
                                 AND i.at > to_timestamp($1) AND i.at <= to_timestamp($2))
                 GROUP BY h.machine_id ORDER BY 2, 1",
                &[&from, &to, &labels, &like],
            )
            .map_err(|e| failed(&shown, e))?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// The hosts `hosts` selects that recorded an interval ending in `from..=to`: (machine
    /// id, host name, labels, intervals).
    pub fn history_hosts(
        &mut self,
        from: f64,
        to: f64,
        hosts: &Hosts,
    ) -> Result<Vec<(String, String, crate::labels::Labels, i64)>> {
        let shown = self.shown.clone();
        let labels = serde_json::to_string(&hosts.labels)?;
        let like = hosts.like();
        let rows = self
            .client
            .query(
                // The hosts first (a few small tables), then their rows by the primary key:
                // one host's day without reading the others'.
                "WITH chosen AS (
                     SELECT DISTINCT h.id, h.machine_id
                     FROM tacho_hosts h JOIN tacho_host_names n ON n.host = h.id
                     WHERE n.labels @> $3::TEXT::JSONB
                       AND ($4::TEXT IS NULL OR n.hostname LIKE $4 OR h.machine_id LIKE $4))
                 SELECT c.machine_id, max(n.hostname), max(n.labels::TEXT), count(*)
                 FROM chosen c
                 JOIN tacho_intervals i ON i.host = c.id
                 JOIN tacho_host_names n ON n.id = i.names
                 WHERE i.at > to_timestamp($1) AND i.at <= to_timestamp($2)
                   AND n.labels @> $3::TEXT::JSONB
                   AND ($4::TEXT IS NULL OR n.hostname LIKE $4 OR c.machine_id LIKE $4)
                 GROUP BY c.machine_id ORDER BY 2, 1",
                &[&from, &to, &labels, &like],
            )
            .map_err(|e| failed(&shown, e))?;
        Ok(rows
            .iter()
            .map(|r| {
                let labels: &str = r.get(2);
                (
                    r.get(0),
                    r.get(1),
                    serde_json::from_str(labels).unwrap_or_default(),
                    r.get(3),
                )
            })
            .collect())
    }
}

/// A failed history query as one line; a missing table says to run `store init`.
fn failed(shown: &str, e: postgres::Error) -> anyhow::Error {
    match e.code() {
        Some(&SqlState::UNDEFINED_TABLE) => anyhow!(
            "the shared store {shown} has no history table; have its administrator run \
             `tacho store init`"
        ),
        _ => anyhow!("shared store {shown}: {}", error_chain(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns_become_like_with_the_rest_literal() {
        let like = |g: &str| {
            Hosts {
                glob: Some(g.into()),
                ..Hosts::default()
            }
            .like()
            .unwrap()
        };
        assert_eq!(like("db-*"), "db-%");
        assert_eq!(like("a_b%?"), "a\\_b\\%_");
    }
}
