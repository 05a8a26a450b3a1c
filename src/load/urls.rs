//! The URLs of a mix: given on the command line, or read from `--urls FILE`, one request a
//! line:
//!
//! ```text
//! # comment
//! [WEIGHT] [METHOD] URL
//! 8 http://127.0.0.1:8080/
//! 1 POST http://127.0.0.1:8080/api
//! ```
//!
//! WEIGHT is a whole number from 1 (the default) to [`MAX_WEIGHT`], its share of the
//! requests beside the others'; METHOD is an HTTP method (`--method` by default). Blank lines
//! and lines starting with `#` are skipped.

use super::engine::{MAX_CYCLE, Request};
use super::target::Target;

/// Largest weight of one line.
pub const MAX_WEIGHT: u32 = 10_000;

/// Most URLs in a mix.
pub const MAX_URLS: usize = 1_000;

/// The requests of `urls` given on the command line, each of weight 1 and `method`.
pub fn of_args(urls: &[String], method: &str) -> Result<Vec<Request>, String> {
    if urls.len() > MAX_URLS {
        return Err(format!("more than {MAX_URLS} URLs; give fewer"));
    }
    urls.iter()
        .map(|u| {
            Ok(Request {
                target: Target::parse(u)?,
                method: method.to_string(),
                weight: 1,
            })
        })
        .collect()
}

/// Reads the lines of a `--urls` file; an error names the line and what is wrong with it.
pub fn parse(text: &str, method: &str) -> Result<Vec<Request>, String> {
    let mut requests = Vec::new();
    let mut total: u64 = 0;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |why: String| format!("line {}: {why}", n + 1);
        let mut words: Vec<&str> = line.split_whitespace().collect();
        let url = words.pop().unwrap_or_default();
        if words.len() > 2 {
            return Err(at(format!(
                "{:?} has more than a weight, a method and a URL; give [WEIGHT] [METHOD] URL",
                crate::text::Escaped(line).to_string()
            )));
        }
        let mut weight = 1;
        let mut method = method.to_string();
        let mut rest = words.as_slice();
        if let [w, tail @ ..] = rest
            && w.bytes().all(|b| b.is_ascii_digit())
        {
            weight = w
                .parse::<u32>()
                .ok()
                .filter(|w| (1..=MAX_WEIGHT).contains(w))
                .ok_or_else(|| at(format!("the weight {w} is not from 1 to {MAX_WEIGHT}")))?;
            rest = tail;
        }
        match rest {
            [] => {}
            [m] if hyper::Method::from_bytes(m.as_bytes()).is_ok() => method = m.to_string(),
            [m] => {
                return Err(at(format!(
                    "{:?} is neither a weight (a whole number) nor an HTTP method; give \
                     [WEIGHT] [METHOD] URL",
                    crate::text::Escaped(m).to_string()
                )));
            }
            _ => {
                return Err(at(format!(
                    "the weight must come before the method; give [WEIGHT] [METHOD] URL, not \
                     {:?}",
                    crate::text::Escaped(line).to_string()
                )));
            }
        }
        let target = Target::parse(url).map_err(at)?;
        total += u64::from(weight);
        if total > MAX_CYCLE {
            return Err(at(format!(
                "the weights add up to more than {MAX_CYCLE}; give smaller ones"
            )));
        }
        if requests.len() == MAX_URLS {
            return Err(at(format!("more than {MAX_URLS} URLs; give fewer")));
        }
        requests.push(Request {
            target,
            method,
            weight,
        });
    }
    if requests.is_empty() {
        return Err("holds no URL; give one a line: [WEIGHT] [METHOD] URL".into());
    }
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn weights_methods_comments_and_defaults() {
        let text =
            "# the mix\n\n8 http://h:1/a\n  1 POST http://h:1/b  \nPUT https://h/c\nhttp://h:1/d\n";
        let r = parse(text, "GET").unwrap();
        let got: Vec<(u32, &str, &str)> = r
            .iter()
            .map(|r| (r.weight, r.method.as_str(), r.target.url.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (8, "GET", "http://h:1/a"),
                (1, "POST", "http://h:1/b"),
                (1, "PUT", "https://h/c"),
                (1, "GET", "http://h:1/d"),
            ]
        );
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, says) in [
            ("http://h/\n0 http://h/", "line 2: the weight 0"),
            ("99999 http://h/", "line 1: the weight 99999"),
            ("GET 3 http://h/", "line 1: the weight must come before"),
            (
                "1 GET x http://h/",
                "line 1: \"1 GET x http://h/\" has more than",
            ),
            ("G(T http://h/", "line 1: \"G(T\" is neither"),
            ("\n\nftp://h/", "line 3: \"ftp://h/\": the scheme"),
            ("# nothing\n", "holds no URL"),
            ("", "holds no URL"),
        ] {
            let e = parse(text, "GET").unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let many = "10000 http://h/\n".repeat(11);
        assert!(
            parse(&many, "GET")
                .unwrap_err()
                .contains("line 11: the weights add up")
        );
    }

    proptest! {
        /// Any text is a mix or one line naming the problem, never a panic.
        #[test]
        fn any_file(text in "([0-9]{0,6} ?(GET |POST |x )?(https?://)?[a-z:0-9/\\[\\]@]{0,12}\n|.{0,20}\n){0,6}") {
            match parse(&text, "GET") {
                Ok(r) => prop_assert!(!r.is_empty() && r.iter().all(|r| r.weight >= 1)),
                Err(e) => prop_assert!(!e.contains('\n')),
            }
        }

        /// Any bytes at all.
        #[test]
        fn any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Err(e) = parse(&String::from_utf8_lossy(&bytes), "GET") {
                prop_assert!(!e.contains('\n'));
            }
        }
    }
}
