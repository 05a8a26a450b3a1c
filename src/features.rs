//! The optional parts of tacho (Cargo features, all on by default): which this build has, for
//! `tacho --version`, and the one-line error of a command or option that needs one it lacks.
//! Parts that merely use a feature when it is there (top's block tracer, `files --bytes`) fall
//! back as when the kernel refuses them, with a note carrying the same text.

/// One optional part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Feature {
    /// The shared PostgreSQL results store (`--db postgres://…`, `runs push`).
    Pg,
    /// The eBPF tracers (block I/O latency and attribution, bytes per file).
    Bpf,
    /// CPU profiling (`tacho profile`, `top --profile`).
    Profile,
    /// `/metrics` over TLS (`tls_server_config` in `--web-config`).
    Tls,
}

impl Feature {
    /// Every feature, in the order `--version` lists them.
    pub(crate) const ALL: [Feature; 4] =
        [Feature::Pg, Feature::Bpf, Feature::Profile, Feature::Tls];

    /// The feature's name in Cargo.toml.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Feature::Pg => "pg",
            Feature::Bpf => "bpf",
            Feature::Profile => "profile",
            Feature::Tls => "tls",
        }
    }

    /// Whether this build has it.
    pub(crate) fn built(self) -> bool {
        match self {
            Feature::Pg => cfg!(feature = "pg"),
            Feature::Bpf => cfg!(feature = "bpf"),
            Feature::Profile => cfg!(feature = "profile"),
            Feature::Tls => cfg!(feature = "tls"),
        }
    }

    /// `Ok` when this build has the feature, else the error saying how to get it.
    pub(crate) fn require(self) -> Result<(), Missing> {
        if self.built() {
            Ok(())
        } else {
            Err(Missing(self))
        }
    }
}

/// A feature this build lacks, as the one-line error of what needed it.
#[derive(Debug, thiserror::Error)]
#[error(
    "tacho was built without the `{name}` feature: rebuild with `cargo build --release \
     --features {name}` (or the default features)",
    name = .0.name()
)]
pub(crate) struct Missing(pub(crate) Feature);

/// The line `tacho --version` adds: each feature with `+` when built in, `-` when not.
pub(crate) fn summary() -> String {
    let words: Vec<String> = Feature::ALL
        .iter()
        .map(|f| format!("{}{}", if f.built() { '+' } else { '-' }, f.name()))
        .collect();
    format!("features: {}", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_feature_names_itself_and_the_rebuild() {
        assert_eq!(
            Missing(Feature::Pg).to_string(),
            "tacho was built without the `pg` feature: rebuild with `cargo build --release \
             --features pg` (or the default features)"
        );
        for f in Feature::ALL {
            assert_eq!(f.require().is_ok(), f.built());
        }
    }

    #[test]
    fn the_summary_lists_every_feature_as_built() {
        let summary = summary();
        for f in Feature::ALL {
            let sign = if f.built() { '+' } else { '-' };
            assert!(
                summary.contains(&format!("{sign}{}", f.name())),
                "{summary}"
            );
        }
    }
}
