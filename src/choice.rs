//! Words an option takes from a fixed set (`--rw randread`, `--engine psync`, `--profile
//! redis`). The library names and documents each value here; the command line
//! offers exactly these words, so the library never depends on the argument parser.

/// A type whose values are chosen by a word on the command line.
pub trait Choice: Copy + Send + Sync + 'static {
    /// Every value, in the order help lists them.
    const ALL: &'static [Self];

    /// The word that names this value.
    fn word(self) -> &'static str;

    /// Other words accepted for the same value.
    fn aliases(self) -> &'static [&'static str] {
        &[]
    }

    /// One line for `--help`, where the word alone does not say enough.
    fn help(self) -> Option<&'static str> {
        None
    }

    /// The value a word (or alias) names.
    fn from_word(word: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.word() == word || v.aliases().contains(&word))
    }
}

#[cfg(test)]
mod tests {
    use super::Choice;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Pet {
        Cat,
        Dog,
    }

    impl Choice for Pet {
        const ALL: &'static [Self] = &[Pet::Cat, Pet::Dog];
        fn word(self) -> &'static str {
            match self {
                Pet::Cat => "cat",
                Pet::Dog => "dog",
            }
        }
        fn aliases(self) -> &'static [&'static str] {
            match self {
                Pet::Cat => &["kitten"],
                Pet::Dog => &[],
            }
        }
    }

    #[test]
    fn words_and_aliases_name_values() {
        assert_eq!(Pet::from_word("dog"), Some(Pet::Dog));
        assert_eq!(Pet::from_word("kitten"), Some(Pet::Cat));
        assert_eq!(Pet::from_word("Dog"), None);
    }
}
