//! Sizes and durations as admins type them (fio's spelling), and as tacho prints them.
//!
//! Sizes are binary: `4k` is 4096 bytes, as in fio (`kb_base=1024`). Durations take `ms`, `s`,
//! `m`, `h`, or plain seconds. Parsers return a message meant to follow "invalid value …: ".

use std::time::Duration;

/// Why a size did not parse; the message follows "invalid value …: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// No leading number.
    #[error("'{0}' is not a size; write a number with an optional suffix, e.g. 4k, 1M, 2300")]
    NotASize(String),
    /// A suffix other than the binary multiples.
    #[error("unknown size suffix '{suffix}' in '{text}'; use k, M, G or T (binary), e.g. 4k")]
    UnknownSuffix {
        /// The suffix as typed.
        suffix: String,
        /// The whole size as typed.
        text: String,
    },
    /// More bytes than a u64 holds.
    #[error("size '{0}' is too large")]
    TooLarge(String),
}

/// Why a duration did not parse; the message follows "invalid value …: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A minus sign.
    #[error("duration '{0}' is negative; give a positive time such as 500ms, 5s or 2m")]
    Negative(String),
    /// No number.
    #[error("'{0}' is not a duration; write e.g. 500ms, 5s, 2m or plain seconds")]
    NotADuration(String),
    /// A unit other than us, ms, s, m and h.
    #[error("unknown time unit '{unit}' in '{text}'; use ms, s, m or h")]
    UnknownUnit {
        /// The unit as typed.
        unit: String,
        /// The whole duration as typed.
        text: String,
    },
    /// More seconds than a `Duration` holds.
    #[error("duration '{0}' is out of range")]
    OutOfRange(String),
}

/// Parses `4k`, `1M`, `1G`, `2300`, `64KiB`, `1m` (all binary multiples; case does not matter).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let s = text.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, suffix) = s.split_at(digits_end);
    if number.is_empty() {
        return Err(SizeError::NotASize(text.into()));
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "ki" | "kib" => 10,
        "m" | "mb" | "mi" | "mib" => 20,
        "g" | "gb" | "gi" | "gib" => 30,
        "t" | "tb" | "ti" | "tib" => 40,
        _ => {
            return Err(SizeError::UnknownSuffix {
                suffix: suffix.into(),
                text: text.into(),
            });
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| SizeError::TooLarge(text.into()))
}

/// Parses `500ms`, `5s`, `2m`, `1h`, `1.5s` or plain seconds (`30`).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    if s.starts_with('-') {
        return Err(DurationError::Negative(text.into()));
    }
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(number_end);
    let value: f64 = number
        .parse()
        .map_err(|_| DurationError::NotADuration(text.into()))?;
    let seconds_per_unit = match unit.to_ascii_lowercase().as_str() {
        "us" => 1e-6,
        "ms" => 1e-3,
        "" | "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(DurationError::UnknownUnit {
                unit: unit.into(),
                text: text.into(),
            });
        }
    };
    Duration::try_from_secs_f64(value * seconds_per_unit)
        .map_err(|_| DurationError::OutOfRange(text.into()))
}

/// A time left, to the second, in the largest units that matter: `1 m 40 s`, `45 s`, `2 h 5 m`.
pub fn format_time_left(left: Duration) -> String {
    let s = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec} s"),
        (0, min, 0) => format!("{min} m"),
        (0, min, sec) => format!("{min} m {sec} s"),
        (h, 0, _) => format!("{h} h"),
        (h, min, _) => format!("{h} h {min} m"),
    }
}

/// `1 test`, `2 tests`, `1 process`, `3 processes`, `1 query`, `0 queries`: a count whose noun
/// agrees with it (`noun` is the singular).
pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        return format!("1 {noun}");
    }
    let consonant_y = noun
        .strip_suffix('y')
        .filter(|stem| !stem.ends_with(['a', 'e', 'o', 'u']));
    match consonant_y {
        Some(stem) => format!("{n} {stem}ies"),
        None if noun.ends_with(['s', 'x']) || noun.ends_with("ch") || noun.ends_with("sh") => {
            format!("{n} {noun}es")
        }
        None => format!("{n} {noun}s"),
    }
}

/// `4KiB`, `1MiB`, `2300B`: exact when the value is a whole multiple, for test names.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (name, shift) in UNITS {
        let unit = 1u64 << shift;
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

/// Bytes in the largest binary unit that keeps them readable: `22.0 MiB`, `1.5 GiB`, `812 B`.
pub fn format_bytes_approx(bytes: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    UNITS
        .iter()
        .find(|(_, shift)| bytes >= 1u64 << shift)
        .map_or(format!("{bytes} B"), |(name, shift)| {
            format!(
                "{} {name}",
                three_digits(bytes as f64 / (1u64 << shift) as f64)
            )
        })
}

/// A rate or count with a k/M suffix and three significant digits: `74.1k`, `812`, `1.25M`.
pub fn format_count(value: f64) -> String {
    let (scaled, suffix) = if value >= 1e6 {
        (value / 1e6, "M")
    } else if value >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    format!("{}{suffix}", three_digits(scaled))
}

/// Bytes per second in MiB/s or GiB/s.
pub fn format_bandwidth(bytes_per_s: f64) -> String {
    let mib = bytes_per_s / (1u64 << 20) as f64;
    if mib >= 1024.0 {
        format!("{} GiB/s", three_digits(mib / 1024.0))
    } else {
        format!("{} MiB/s", three_digits(mib))
    }
}

/// A latency in the unit that keeps it readable: `850ns`, `61.2µs`, `1.30ms`, `2.05s`.
pub fn format_latency_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{}µs", three_digits(ns / 1e3))
    } else if ns < 1e9 {
        format!("{}ms", three_digits(ns / 1e6))
    } else {
        format!("{}s", three_digits(ns / 1e9))
    }
}

/// Three significant digits (at most two decimals) of `v`, written where it is formatted
/// rather than into a string of its own: compare formats hundreds of thousands.
struct ThreeDigits(f64);

impl std::fmt::Display for ThreeDigits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        if v >= 100.0 {
            write!(f, "{v:.0}")
        } else if v >= 10.0 {
            write!(f, "{v:.1}")
        } else {
            write!(f, "{v:.2}")
        }
    }
}

fn three_digits(v: f64) -> ThreeDigits {
    ThreeDigits(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn time_left_in_the_units_that_matter() {
        assert_eq!(format_time_left(Duration::from_secs(100)), "1 m 40 s");
        assert_eq!(format_time_left(Duration::from_millis(44_200)), "45 s");
        assert_eq!(format_time_left(Duration::from_secs(120)), "2 m");
        assert_eq!(format_time_left(Duration::from_secs(7530)), "2 h 5 m");
        assert_eq!(format_time_left(Duration::ZERO), "0 s");
    }

    #[test]
    fn counts_agree_with_their_nouns() {
        assert_eq!(plural(1, "test"), "1 test");
        assert_eq!(plural(0, "test"), "0 tests");
        assert_eq!(plural(2, "process"), "2 processes");
        assert_eq!(plural(3, "query"), "3 queries");
        assert_eq!(plural(4, "day"), "4 days");
        assert_eq!(plural(1, "difference"), "1 difference");
    }

    #[test]
    fn sizes_are_binary_like_fio() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("2300"), Ok(2300));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(
            parse_size("")
                .unwrap_err()
                .to_string()
                .contains("not a size")
        );
        assert!(
            parse_size("-4k")
                .unwrap_err()
                .to_string()
                .contains("not a size")
        );
        assert!(
            parse_size("4x")
                .unwrap_err()
                .to_string()
                .contains("unknown size suffix")
        );
        assert!(
            parse_size("99999999999T")
                .unwrap_err()
                .to_string()
                .contains("too large")
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn bad_durations_say_why() {
        assert!(
            parse_duration("-5s")
                .unwrap_err()
                .to_string()
                .contains("negative")
        );
        assert!(
            parse_duration("abc")
                .unwrap_err()
                .to_string()
                .contains("not a duration")
        );
        assert!(
            parse_duration("5 days")
                .unwrap_err()
                .to_string()
                .contains("unknown time unit")
        );
        assert!(
            parse_duration("1.2.3s")
                .unwrap_err()
                .to_string()
                .contains("not a duration")
        );
        assert!(parse_duration("1e300h").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(format_size(4096), "4KiB");
        assert_eq!(format_size(1 << 20), "1MiB");
        assert_eq!(format_size(2300), "2300B");
        assert_eq!(format_bytes_approx(23_066_700), "22.0 MiB");
        assert_eq!(format_bytes_approx(812), "812 B");
        assert_eq!(format_bytes_approx(3 << 30), "3.00 GiB");
        assert_eq!(format_count(74_123.0), "74.1k");
        assert_eq!(format_count(812.0), "812");
        assert_eq!(
            format_bandwidth(1.5 * 1024.0 * 1024.0 * 1024.0),
            "1.50 GiB/s"
        );
        assert_eq!(format_latency_ns(61_234.0), "61.2µs");
        assert_eq!(format_latency_ns(1_300_000.0), "1.30ms");
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,24}") {
            let _ = parse_size(&s);
            let _ = parse_duration(&s);
        }

        #[test]
        fn size_round_trips(n in 0u64..(1 << 40)) {
            prop_assert_eq!(parse_size(&n.to_string()), Ok(n));
            prop_assert_eq!(parse_size(&format!("{n}k")).ok(), n.checked_mul(1024));
        }
    }
}
