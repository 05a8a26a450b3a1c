//! The fleet settings a command runs with, resolved once from its flags and the environment
//! (flags first): the shared store and this host's labels.

use crate::labels::{self, Labels};
use crate::store;
use anyhow::{Result, anyhow, bail};

/// Where the fleet's rows go and what they carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The shared store's URL, when there is one.
    pub url: Option<String>,
    /// This host's labels.
    pub labels: Labels,
}

impl Settings {
    /// `--db`, else `$TACHO_DB` or the config file's `db_url` when it is a `postgres://` URL;
    /// `--label`s, else `$TACHO_LABELS`, else the config file's `[labels]`.
    pub fn resolve(db: Option<&str>, flag_labels: &[String]) -> Result<Settings> {
        let url = match db {
            Some(u) if !store::is_url(u) => {
                bail!("--db here is the shared store: pass postgres://USER@HOST/DATABASE")
            }
            Some(u) => Some(u.to_owned()),
            #[cfg(feature = "pg")]
            None => store::server_url_from_env_or_config(),
            // Without the client a server is never sent to (`record --db` names the feature).
            #[cfg(not(feature = "pg"))]
            None => None,
        };
        let labels = if flag_labels.is_empty() {
            labels::of_host().map_err(|e| anyhow!(e))?
        } else {
            labels::collect(flag_labels.iter().map(String::as_str)).map_err(|e| anyhow!(e))?
        };
        Ok(Settings { url, labels })
    }
}
