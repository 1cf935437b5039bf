//! Values as the Linkerd CLI (Go's pflag) writes them: booleans as `true` or
//! `false` (and the other spellings of Go's `strconv.ParseBool`), durations as
//! Go's `time.Duration` prints them (`5m0s`, `1h2m3.5s`, `300ms`), string
//! slices as `[a,b]`.

use std::time::Duration;

/// A boolean as Go's `strconv.ParseBool` reads one.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{text:?} is not true or false")),
    }
}

/// A duration as Go's `time.ParseDuration` reads one: a sequence of decimal
/// numbers, each with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), or `0`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration such as 30s, 5m0s or 1h30m");
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += number * seconds;
        rest = &rest[unit..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// A repeated string flag whose values may each be a list: `a,b` or pflag's
/// `[a,b]` (what `--as-group=[]` means when `linkerd check` passes it on).
pub fn string_slice(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| {
            let v = v.trim();
            let v = v
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .unwrap_or(v);
            v.split(',')
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans() {
        for (text, want) in [
            ("true", Ok(true)),
            ("1", Ok(true)),
            ("False", Ok(false)),
            ("f", Ok(false)),
        ] {
            assert_eq!(parse_bool(text), want, "{text}");
        }
        assert!(parse_bool("yes").is_err());
    }

    #[test]
    fn durations() {
        for (text, ms) in [
            ("0", 0),
            ("5m0s", 300_000),
            ("1h2m3.5s", 3_723_500),
            ("300ms", 300),
            ("30s", 30_000),
            ("1.5h", 5_400_000),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_millis(ms)),
                "{text}"
            );
        }
        for text in ["", "5", "5x", "m", "-1s", "1s2"] {
            assert!(parse_duration(text).is_err(), "{text}");
        }
    }

    #[test]
    fn string_slices() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(string_slice(&s(&["[]"])), Vec::<String>::new());
        assert_eq!(string_slice(&s(&["[a,b]", "c"])), s(&["a", "b", "c"]));
        assert_eq!(string_slice(&s(&["a, b"])), s(&["a", "b"]));
    }
}
