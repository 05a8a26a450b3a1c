//! Times as admins type them for a replay: `03:00`, `yesterday 03:00`, `3h ago`, `now`, RFC 3339
//! (`2026-11-23T03:00:00Z`) or a local `2026-11-23 03:00`.
//!
//! chrono parses the calendar forms and knows the local zone; the relative forms are a few
//! words, parsed here (chrono has no parser for them).

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone};

/// A `--since TIME` as the results store's RFC 3339 UTC text (`2026-11-01T00:00:00Z`), so it
/// compares with a run's `created_at` as text.
pub fn since_utc(text: &str) -> anyhow::Result<String> {
    let now = chrono::Local::now();
    let t = parse(text, &now).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    Ok(t.with_timezone(&chrono::Utc)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string())
}

/// Text that is none of the forms [`parse`] reads (trimmed as it was read).
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot read {0:?} as a time; use 03:00, yesterday 03:00, 3h ago, now, or RFC 3339 \
     (2026-11-23T03:00:00Z)"
)]
pub struct BadTime(String);

/// Parses `text` relative to `now` (in `now`'s zone). A bare time of day means the latest one
/// not after `now`: `03:00` typed at 01:00 is last night's.
pub fn parse<Tz: TimeZone>(text: &str, now: &DateTime<Tz>) -> Result<DateTime<Tz>, BadTime> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let fail = || BadTime(t.to_string());
    if lower == "now" {
        return Ok(now.clone());
    }
    if let Some(rest) = lower.strip_suffix(" ago") {
        let span = parse_span(rest.trim()).ok_or_else(fail)?;
        return now.clone().checked_sub_signed(span).ok_or_else(fail);
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.with_timezone(&now.timezone()));
    }
    for format in ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(t, format) {
            return local(&now.timezone(), naive).ok_or_else(fail);
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return local(&now.timezone(), date.and_time(NaiveTime::MIN)).ok_or_else(fail);
    }
    let (day, clock) = match lower.split_once(' ') {
        Some(("yesterday", c)) => (Some(1), c.trim()),
        Some(("today", c)) => (Some(0), c.trim()),
        None if lower == "yesterday" => (Some(1), "00:00"),
        None if lower == "today" => (Some(0), "00:00"),
        None => (None, lower.as_str()),
        Some(_) => return Err(fail()),
    };
    let time = NaiveTime::parse_from_str(clock, "%H:%M:%S")
        .or_else(|_| NaiveTime::parse_from_str(clock, "%H:%M"))
        .map_err(|_| fail())?;
    let today = now.date_naive();
    let at = |days_back: i64| {
        today
            .checked_sub_signed(Duration::days(days_back))
            .and_then(|d| local(&now.timezone(), d.and_time(time)))
    };
    match day {
        Some(back) => at(back).ok_or_else(fail),
        None => {
            let candidate = at(0).ok_or_else(fail)?;
            if candidate > *now {
                at(1).ok_or_else(fail)
            } else {
                Ok(candidate)
            }
        }
    }
}

/// A local wall-clock time; the earlier one when a clock change repeats it, `None` in a gap.
fn local<Tz: TimeZone>(tz: &Tz, naive: NaiveDateTime) -> Option<DateTime<Tz>> {
    tz.from_local_datetime(&naive).earliest()
}

/// `3h`, `90s`, `2 days`, `10 min`: a count and a unit.
fn parse_span(text: &str) -> Option<Duration> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let n: i64 = text[..digits].parse().ok()?;
    let unit = text[digits..].trim();
    let seconds: i64 = match unit {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 604_800,
        _ => return None,
    };
    Duration::try_seconds(n.checked_mul(seconds)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Timelike, Utc};
    use proptest::prelude::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 23, 1, 30, 0).unwrap()
    }

    #[test]
    fn reads_the_forms_admins_type() {
        let n = now();
        let p = |s: &str| parse(s, &n).unwrap().to_rfc3339();
        assert_eq!(
            p("03:00"),
            "2026-11-22T03:00:00+00:00",
            "last night's 03:00"
        );
        assert_eq!(p("01:00"), "2026-11-23T01:00:00+00:00");
        assert_eq!(p("yesterday 03:00"), "2026-11-22T03:00:00+00:00");
        assert_eq!(p("today 00:10:05"), "2026-11-23T00:10:05+00:00");
        assert_eq!(p("3h ago"), "2026-11-22T22:30:00+00:00");
        assert_eq!(p("2 days ago"), "2026-11-21T01:30:00+00:00");
        assert_eq!(p("now"), n.to_rfc3339());
        assert_eq!(p("2026-11-20T05:06:07+01:00"), "2026-11-20T04:06:07+00:00");
        assert_eq!(p("2026-11-20 05:06"), "2026-11-20T05:06:00+00:00");
        for bad in [
            "",
            "25:00",
            "3 parsecs ago",
            "tomorrow 03:00",
            "-3h ago",
            "yesterday",
        ] {
            if bad == "yesterday" {
                assert!(parse(bad, &n).is_ok());
                continue;
            }
            assert!(parse(bad, &n).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in ".{0,40}") {
            let _ = parse(&text, &now());
        }

        #[test]
        fn ago_goes_back_exactly(n in 0i64..100_000, unit in prop::sample::select(vec![("s", 1i64), ("min", 60), ("h", 3600), ("d", 86_400)])) {
            let t = parse(&format!("{n}{} ago", unit.0), &now()).unwrap();
            prop_assert_eq!((now() - t).num_seconds(), n * unit.1);
        }

        #[test]
        fn a_time_of_day_is_the_latest_not_after_now(h in 0u32..24, m in 0u32..60) {
            let t = parse(&format!("{h:02}:{m:02}"), &now()).unwrap();
            prop_assert!(t <= now());
            prop_assert!(now() - t < Duration::days(1));
            prop_assert_eq!((t.hour(), t.minute()), (h, m));
        }
    }
}
