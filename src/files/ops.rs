//! Operation letters: what fanotify's event masks mean to an admin, in fatrace's alphabet.
//!
//! R read, C close, W write (a modification, or a close after writing), O open, + create,
//! D delete, < moved from, > moved to. One event can carry several letters because the kernel
//! merges events on the same file by the same process while they wait in the queue ("CW":
//! closed after writing; "RO": opened and read before tacho looked).

use std::fmt;

/// One operation letter. The order of the variants is the order letters are printed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Read,
    Close,
    Write,
    Open,
    Create,
    Delete,
    MovedFrom,
    MovedTo,
}

impl Op {
    /// Every letter, in print order.
    pub const ALL: [Op; 8] = [
        Op::Read,
        Op::Close,
        Op::Write,
        Op::Open,
        Op::Create,
        Op::Delete,
        Op::MovedFrom,
        Op::MovedTo,
    ];

    pub fn letter(self) -> char {
        match self {
            Op::Read => 'R',
            Op::Close => 'C',
            Op::Write => 'W',
            Op::Open => 'O',
            Op::Create => '+',
            Op::Delete => 'D',
            Op::MovedFrom => '<',
            Op::MovedTo => '>',
        }
    }

    fn from_letter(c: char) -> Option<Op> {
        Op::ALL
            .into_iter()
            .find(|op| op.letter() == c.to_ascii_uppercase())
    }

    /// The fanotify mask bits that produce this letter.
    pub fn mask(self) -> u64 {
        match self {
            Op::Read => libc::FAN_ACCESS,
            Op::Close => libc::FAN_CLOSE,
            Op::Write => libc::FAN_MODIFY | libc::FAN_CLOSE_WRITE,
            Op::Open => libc::FAN_OPEN | libc::FAN_OPEN_EXEC,
            Op::Create => libc::FAN_CREATE,
            Op::Delete => libc::FAN_DELETE,
            Op::MovedFrom => libc::FAN_MOVED_FROM,
            Op::MovedTo => libc::FAN_MOVED_TO,
        }
    }

    /// Position in [`Op::ALL`], for per-letter counters.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A set of operation letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ops(u8);

impl Ops {
    pub const NONE: Ops = Ops(0);
    pub const ALL: Ops = Ops(0xff);

    /// Letters that need directory-entry events (create, delete, move), which fanotify reports
    /// only to groups that identify files by handle (FAN_REPORT_DFID_NAME).
    pub const DIRENT: Ops = Ops(1 << Op::Create as u8
        | 1 << Op::Delete as u8
        | 1 << Op::MovedFrom as u8
        | 1 << Op::MovedTo as u8);

    /// The letters a fanotify event mask stands for.
    pub fn from_mask(mask: u64) -> Ops {
        Op::ALL
            .into_iter()
            .filter(|op| mask & op.mask() != 0)
            .fold(Ops::NONE, |acc, op| acc.with(op))
    }

    /// Parses `--ops` text such as `RW+D` or `w`; every character must be a known letter.
    pub fn parse(text: &str) -> Result<Ops, OpsError> {
        if text.is_empty() {
            return Err(OpsError::Empty);
        }
        text.chars().try_fold(Ops::NONE, |acc, c| {
            Op::from_letter(c)
                .map(|op| acc.with(op))
                .ok_or(OpsError::UnknownLetter(c))
        })
    }

    pub fn with(self, op: Op) -> Ops {
        Ops(self.0 | 1 << op as u8)
    }

    pub fn contains(self, op: Op) -> bool {
        self.0 & (1 << op as u8) != 0
    }

    pub fn intersects(self, other: Ops) -> bool {
        self.0 & other.0 != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Op> {
        Op::ALL.into_iter().filter(move |op| self.contains(*op))
    }

    /// The fanotify mask that reports these letters.
    pub fn mask(self) -> u64 {
        self.iter().fold(0, |acc, op| acc | op.mask())
    }
}

impl fmt::Display for Ops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: String = self.iter().map(Op::letter).collect();
        f.pad(&text)
    }
}

/// Why `--ops` text did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpsError {
    /// No letters at all.
    #[error("no operation letters given; use some of R C W O + D < >, e.g. W")]
    Empty,
    /// A character that names no operation.
    #[error("unknown operation letter {0:?}; use some of R C W O + D < >, e.g. RW")]
    UnknownLetter(char),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn masks_become_fatrace_letters_in_order() {
        let close_write = Ops::from_mask(libc::FAN_CLOSE_WRITE);
        assert_eq!(close_write.to_string(), "CW");
        let merged = Ops::from_mask(libc::FAN_OPEN | libc::FAN_ACCESS | libc::FAN_CLOSE_NOWRITE);
        assert_eq!(merged.to_string(), "RCO");
        let dirent = Ops::from_mask(libc::FAN_CREATE | libc::FAN_DELETE | libc::FAN_MOVE);
        assert_eq!(dirent.to_string(), "+D<>");
        assert_eq!(Ops::from_mask(libc::FAN_Q_OVERFLOW), Ops::NONE);
        assert_eq!(format!("{:<3}|", Ops::from_mask(libc::FAN_MODIFY)), "W  |");
    }

    #[test]
    fn parse_accepts_letters_in_any_case_and_names_bad_ones() {
        let ops = Ops::parse("w+d").unwrap();
        assert_eq!(ops.to_string(), "W+D");
        assert!(
            ops.mask() & libc::FAN_CLOSE_WRITE != 0,
            "W includes close-after-write"
        );
        assert!(Ops::parse("RX").unwrap_err().to_string().contains("'X'"));
        assert!(Ops::parse("").unwrap_err().to_string().contains("e.g."));
    }

    #[test]
    fn dirent_letters_are_create_delete_move() {
        assert_eq!(Ops::DIRENT.to_string(), "+D<>");
        assert!(!Ops::parse("RWOC").unwrap().intersects(Ops::DIRENT));
    }

    proptest! {
        #[test]
        fn letters_round_trip(mask in any::<u64>()) {
            let ops = Ops::from_mask(mask);
            let text = ops.to_string();
            if !text.is_empty() {
                prop_assert_eq!(Ops::parse(&text).unwrap(), ops);
            }
        }
    }
}
