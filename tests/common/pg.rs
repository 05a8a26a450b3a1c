//! A PostgreSQL database of a test's own on the server `TACHO_TEST_PG` names (an admin URL
//! such as `postgres://postgres:PASSWORD@127.0.0.1:5432/postgres?sslmode=disable`; `.ci/run`
//! starts Debian's cluster and sets it).

use postgres::{Client, NoTls};
use std::sync::Mutex;

/// A database of its own on the test server, dropped when the test ends (even on failure),
/// with the host roles made for it.
pub struct TestDb {
    admin: String,
    /// The database's name.
    pub name: String,
    /// A URL to it, as `--db` takes, logged in as the administrator.
    pub url: String,
    roles: Mutex<Vec<String>>,
}

impl TestDb {
    /// A database with tacho's schema, made by `tacho store init` as an administrator does;
    /// `None` (after `skip`) when no server is configured.
    pub fn new(tag: &str) -> Option<TestDb> {
        let db = TestDb::empty(tag)?;
        let o = super::run(&["store", "init", "--db", &db.url]);
        assert_eq!(o.status.code(), Some(0), "{}", super::stderr(&o));
        Some(db)
    }

    /// A database without tacho's schema (nobody ran `store init`).
    pub fn empty(tag: &str) -> Option<TestDb> {
        let Ok(admin) = std::env::var("TACHO_TEST_PG") else {
            super::skip("TACHO_TEST_PG is not set: no PostgreSQL server to test against");
            return None;
        };
        let name = unique(tag);
        let url = with_user_db(&admin, None, &name);
        let mut client = Client::connect(&admin, NoTls).expect("cannot reach TACHO_TEST_PG");
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        Some(TestDb {
            admin,
            name,
            url,
            roles: Mutex::new(Vec::new()),
        })
    }

    /// A client of the database.
    pub fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).unwrap()
    }

    /// A host role made as the administrator is told to by `store init`: created with a
    /// password, then given exactly the grants `store init --role` prints. Returns its URL.
    pub fn host_role(&self, tag: &str) -> String {
        let role = unique(tag);
        let o = super::run(&["store", "init", "--db", &self.url, "--role", &role]);
        assert_eq!(o.status.code(), Some(0), "{}", super::stderr(&o));
        let grants = super::stdout(&o);
        assert!(grants.contains(&role), "{grants}");
        let mut c = self.client();
        c.batch_execute(&format!("CREATE ROLE {role} LOGIN PASSWORD 'host-pw'"))
            .unwrap();
        self.roles.lock().unwrap().push(role.clone());
        c.batch_execute(&grants).unwrap();
        with_user_db(&self.admin, Some(&format!("{role}:host-pw")), &self.name)
    }
}

/// A name no other test process uses.
fn unique(tag: &str) -> String {
    format!(
        "tacho_{tag}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    )
}

/// `admin` with another database and, when given, another `user:password`.
fn with_user_db(admin: &str, login: Option<&str>, name: &str) -> String {
    let (path, query) = admin.split_once('?').unwrap_or((admin, ""));
    let (base, _) = path
        .rsplit_once('/')
        .expect("TACHO_TEST_PG has a /DATABASE");
    let base = match login {
        Some(login) => {
            let (scheme, rest) = base.split_once("://").unwrap();
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{login}@{host}")
        }
        None => base.to_owned(),
    };
    match query {
        "" => format!("{base}/{name}"),
        q => format!("{base}/{name}?{q}"),
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut c) = Client::connect(&self.admin, NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
            for role in self.roles.lock().unwrap().iter() {
                let _ = c.batch_execute(&format!("DROP ROLE IF EXISTS {role}"));
            }
        }
    }
}
