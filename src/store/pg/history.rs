//! The fleet's history in the shared store: one row per host and interval of `tacho record
//! --db` (`tacho_history`, partitioned by day), written idempotently by (machine id, end of
//! the interval), and read back by window for `tacho top --db`.

use super::{PgStore, error_chain};
use anyhow::{Result, anyhow, bail};
use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use serde::{Deserialize, Serialize};

/// One interval of one host as the shared store keeps it (and the recorder's backlog holds
/// it until it is sent).
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
                            WHERE tablename = 'tacho_history' AND schemaname = current_schema())
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
    /// need. Returns how many were new.
    pub fn ship(&mut self, rows: &[HistoryRow]) -> Result<u64, postgres::Error> {
        let mut tx = self.client.transaction()?;
        let at: Vec<f64> = rows.iter().map(|r| r.at_unix_s).collect();
        // The days as the server rounds the times (to the microsecond) and files them.
        tx.execute(
            "SELECT tacho_history_partition(day) FROM (
                 SELECT DISTINCT (to_timestamp(a) AT TIME ZONE 'UTC')::DATE AS day
                 FROM unnest($1::FLOAT8[]) AS a) AS days",
            &[&at],
        )?;
        // One statement per batch: the rows as arrays, unnested by the server.
        let mut cols: [Vec<String>; 5] = Default::default();
        let mut seconds = Vec::new();
        for r in rows {
            cols[0].push(r.machine_id.clone());
            cols[1].push(r.hostname.clone());
            cols[2].push(serde_json::to_string(&r.labels).unwrap_or_else(|_| "{}".into()));
            cols[3].push(r.findings.to_string());
            cols[4].push(r.summary.to_string());
            seconds.push(r.seconds);
        }
        let new = tx.execute(
            "INSERT INTO tacho_history (machine_id, hostname, labels, at, seconds, findings,
                                        summary)
             SELECT m, h, l::JSONB, to_timestamp(a), s, f::JSONB, d::JSONB
             FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::FLOAT8[], $5::FLOAT8[],
                         $6::TEXT[], $7::TEXT[]) AS u(m, h, l, a, s, f, d)
             ON CONFLICT (machine_id, at) DO NOTHING",
            &[
                &cols[0], &cols[1], &cols[2], &at, &seconds, &cols[3], &cols[4],
            ],
        )?;
        tx.commit()?;
        Ok(new)
    }

    /// Whether the connection is gone (the server stopped or the network dropped it).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// The rows of hosts `hosts` selects with an interval ending in `from..=to`, by host then
    /// time, each handed to `each`; `findings_only` reads only rows with findings, and
    /// without their other figures (`summary` is then `null`).
    pub fn history_each(
        &mut self,
        from: f64,
        to: f64,
        hosts: &Hosts,
        findings_only: bool,
        mut each: impl FnMut(HistoryRow) -> Result<()>,
    ) -> Result<()> {
        let shown = self.shown.clone();
        let fail = |e: postgres::Error| match e.code() {
            Some(&SqlState::UNDEFINED_TABLE) => anyhow!(
                "the shared store {shown} has no history table; have its administrator run \
                 `tacho store init`"
            ),
            _ => anyhow!("shared store {shown}: {}", error_chain(&e)),
        };
        let labels = serde_json::to_string(&hosts.labels)?;
        let like = hosts.like();
        let sql = format!(
            "SELECT machine_id, hostname, labels::TEXT, extract(epoch FROM at)::FLOAT8, seconds,
                    findings::TEXT, {}
             FROM tacho_history
             WHERE at > to_timestamp($1) AND at <= to_timestamp($2)
               AND labels @> $3::TEXT::JSONB
               AND ($4::TEXT IS NULL OR hostname LIKE $4 OR machine_id LIKE $4)
               {}
             ORDER BY machine_id, at",
            if findings_only {
                "NULL::TEXT"
            } else {
                "summary::TEXT"
            },
            if findings_only {
                "AND findings <> '[]'::JSONB"
            } else {
                ""
            }
        );
        let params: [&(dyn postgres::types::ToSql + Sync); 4] = [&from, &to, &labels, &like];
        let mut rows = self
            .client
            .query_raw(&sql, params.iter().copied())
            .map_err(fail)?;
        while let Some(r) = rows.next().map_err(fail)? {
            let json = |i: usize| -> serde_json::Value {
                r.get::<_, Option<&str>>(i)
                    .and_then(|t| serde_json::from_str(t).ok())
                    .unwrap_or(serde_json::Value::Null)
            };
            each(HistoryRow {
                machine_id: r.get(0),
                hostname: r.get(1),
                labels: serde_json::from_value(json(2)).unwrap_or_default(),
                at_unix_s: r.get(3),
                seconds: r.get(4),
                findings: json(5),
                summary: json(6),
            })?;
        }
        Ok(())
    }

    /// The hosts `hosts` selects that recorded an interval ending in `from..=to`: (machine
    /// id, host name, labels, intervals).
    pub fn history_hosts(
        &mut self,
        from: f64,
        to: f64,
        hosts: &Hosts,
    ) -> Result<Vec<(String, String, crate::labels::Labels, i64)>> {
        let labels = serde_json::to_string(&hosts.labels)?;
        let like = hosts.like();
        let rows = self
            .client
            .query(
                "SELECT machine_id, max(hostname), max(labels::TEXT), count(*)
                 FROM tacho_history
                 WHERE at > to_timestamp($1) AND at <= to_timestamp($2)
                   AND labels @> $3::TEXT::JSONB
                   AND ($4::TEXT IS NULL OR hostname LIKE $4 OR machine_id LIKE $4)
                 GROUP BY machine_id ORDER BY 2, 1",
                &[&from, &to, &labels, &like],
            )
            .map_err(|e| anyhow!("shared store {}: {}", self.shown, error_chain(&e)))?;
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
