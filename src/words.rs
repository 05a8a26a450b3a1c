//! Closed sets of words as types: an enum whose variants are written (JSON, Prometheus labels,
//! reports) as fixed words, declared from one table of (variant, word) so the word a document
//! stores and the word a person reads cannot drift apart, and a misspelt code fails to compile.

/// Declares a `Copy` enum whose variants serialize as the given words, with `as_str`,
/// `Display`, and (in tests) `ALL`, every variant in declaration order:
///
/// ```ignore
/// words! {
///     /// What the enum is.
///     pub enum Code {
///         /// What this one means.
///         Spread = "spread",
///     }
/// }
/// ```
macro_rules! words {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$doc:meta])* $variant:ident = $word:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            ::serde::Serialize, ::serde::Deserialize,
        )]
        pub enum $name {
            $($(#[$doc])* #[serde(rename = $word)] $variant,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            #[cfg(test)]
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word documents store and reports print.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use words;
