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
        self.role_with(tag, |role| {
            let o = super::run(&["store", "init", "--db", &self.url, "--role", role]);
            assert_eq!(o.status.code(), Some(0), "{}", super::stderr(&o));
            super::stdout(&o)
        })
    }

    /// A role created with a password and given the grants `grants` writes for its name.
    /// Returns its URL.
    pub fn role_with(&self, tag: &str, grants: impl FnOnce(&str) -> String) -> String {
        let role = unique(tag);
        let grants = grants(&role);
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

/// A PostgreSQL cluster of the test's own, in a temporary directory, on a free loopback port,
/// so a test can stop and start it without disturbing the tests on the shared one. Needs root
/// (the server runs as the `postgres` user). Logins are trusted (loopback and its own socket
/// directory only); stopped and removed on drop.
pub struct OwnCluster {
    dir: tempfile::TempDir,
    /// Its admin URL.
    pub url: String,
}

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

impl OwnCluster {
    /// `None` (after `skip`) when not root.
    pub fn start(tag: &str) -> Option<OwnCluster> {
        if !super::is_root() {
            super::skip(&format!(
                "{tag}: a cluster of its own runs as postgres: needs root"
            ));
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("tacho-pg-")
            .tempdir()
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let data = dir.path().join("data");
        let chown = std::process::Command::new("chown")
            .args(["postgres:postgres"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(chown.success());
        let o = as_postgres(&format!(
            "{PG_BIN}/initdb -D {} -A trust -U postgres --no-sync -E UTF8",
            data.display()
        ));
        assert!(
            o.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::write(
            data.join("postgresql.auto.conf"),
            format!(
                "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
                 fsync = off\nshared_buffers = 16MB\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let cluster = OwnCluster {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres?sslmode=disable"),
            dir,
        };
        cluster.up();
        Some(cluster)
    }

    /// Starts the server, waiting until it takes connections.
    pub fn up(&self) {
        let o = as_postgres(&format!(
            "{PG_BIN}/pg_ctl -D {} -l {} -w start",
            self.dir.path().join("data").display(),
            self.dir.path().join("log").display()
        ));
        assert!(
            o.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }

    /// Stops the server (fast: connections are cut), waiting until it is down.
    pub fn down(&self) {
        let o = as_postgres(&format!(
            "{PG_BIN}/pg_ctl -D {} -m fast -w stop",
            self.dir.path().join("data").display()
        ));
        assert!(
            o.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = as_postgres(&format!(
            "{PG_BIN}/pg_ctl -D {} -m immediate -w stop",
            self.dir.path().join("data").display()
        ));
    }
}

fn as_postgres(command: &str) -> std::process::Output {
    std::process::Command::new("su")
        .args(["postgres", "-s", "/bin/sh", "-c", command])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}
