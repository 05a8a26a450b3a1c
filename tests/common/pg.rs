//! A PostgreSQL database of a test's own on the server `TACHO_TEST_PG` names (an admin URL
//! such as `postgres://postgres:PASSWORD@127.0.0.1:5432/postgres?sslmode=disable`; `.ci/run`
//! starts Debian's cluster and sets it).

use postgres::{Client, NoTls};

/// A database of its own on the test server, dropped when the test ends (even on failure).
pub struct TestDb {
    admin: String,
    /// The database's name.
    pub name: String,
    /// A URL to it, as `--db` takes.
    pub url: String,
}

impl TestDb {
    /// `None` (after `skip`) when no server is configured.
    pub fn new(tag: &str) -> Option<TestDb> {
        let Ok(admin) = std::env::var("TACHO_TEST_PG") else {
            super::skip("TACHO_TEST_PG is not set: no PostgreSQL server to test against");
            return None;
        };
        let name = format!(
            "tacho_{tag}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        let (path, query) = admin.split_once('?').unwrap_or((admin.as_str(), ""));
        let (base, _) = path
            .rsplit_once('/')
            .expect("TACHO_TEST_PG has a /DATABASE");
        let url = match query {
            "" => format!("{base}/{name}"),
            q => format!("{base}/{name}?{q}"),
        };
        let mut client = Client::connect(&admin, NoTls).expect("cannot reach TACHO_TEST_PG");
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        Some(TestDb { admin, name, url })
    }

    /// A client of the database.
    pub fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut c) = Client::connect(&self.admin, NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}
