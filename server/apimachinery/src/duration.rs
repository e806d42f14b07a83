//! Go duration syntax (`5m`, `1h30m`, `1.5s`, `300ms`): `time.ParseDuration`, which is also how
//! `metav1.Duration` fields read their JSON strings.
//!
//! Every duration kcp and its tools read is spelled this way: the upstream server flags, the
//! certificate lifetimes in the operator's resources (`8760h`, `720h0m0s`) and the test tools'
//! flags. kcp-operator renders durations with Go's `time.Duration.String()` (`5m0s`, `1h0m0s`,
//! `500ms`), so anything short of Go's full grammar would reject Deployments the operator writes.
//! Negative values are refused: every duration here is a period, a lifetime or a TTL.
//! [`parse_or_seconds`] is the test tools' looser form (`kcp-bench`, the end-to-end node agent):
//! a bare number counts as seconds and surrounding whitespace is ignored.

use std::time::Duration;

/// Why a value is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("invalid duration {0:?}: expected numbers with units, e.g. 30s, 5m, 1h30m")]
    Syntax(String),
    #[error("missing unit in duration {0:?} (one of ns, us, ms, s, m, h)")]
    MissingUnit(String),
    #[error("unknown unit {unit:?} in duration {input:?} (one of ns, us, ms, s, m, h)")]
    UnknownUnit { unit: String, input: String },
    #[error("negative duration {0:?} is not allowed here")]
    Negative(String),
    #[error("duration {0:?} is too large")]
    Overflow(String),
}

/// Parses a Go duration; the result is at most Go's maximum (`i64::MAX` nanoseconds).
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    parse_go(input, false)
}

/// Parses a Go duration or a bare number of seconds (`90`, `1.5`), ignoring surrounding
/// whitespace: the spelling the test tools' flags accept.
pub fn parse_or_seconds(input: &str) -> Result<Duration, DurationError> {
    parse_go(input.trim(), true)
}

/// Go's `time.ParseDuration`, non-negative; with `bare_seconds` a lone number without unit is
/// seconds (Go refuses it, except `0`).
fn parse_go(input: &str, bare_seconds: bool) -> Result<Duration, DurationError> {
    let (negative, body) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        Some(_) => (false, input),
        None => return Err(DurationError::Empty),
    };
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() {
        return Err(DurationError::Syntax(input.to_owned()));
    }
    let overflow = || DurationError::Overflow(input.to_owned());
    let mut total: u128 = 0;
    let mut rest = body;
    while !rest.is_empty() {
        let (whole, after_whole) = split_digits(rest);
        let (fraction, after_number) = match after_whole.strip_prefix('.') {
            Some(after_dot) => split_digits(after_dot),
            None => ("", after_whole),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(DurationError::Syntax(input.to_owned()));
        }
        let unit_len = after_number
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after_number.len());
        let (unit, next) = after_number.split_at(unit_len);
        let whole_input_is_a_number = bare_seconds && rest.len() == body.len() && next.is_empty();
        let unit = match unit {
            "" if whole_input_is_a_number => "s",
            "" => return Err(DurationError::MissingUnit(input.to_owned())),
            unit => unit,
        };
        let unit_nanos = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            unit: unit.to_owned(),
            input: input.to_owned(),
        })?;
        let whole_value: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| overflow())?
        };
        total = whole_value
            .checked_mul(unit_nanos)
            .and_then(|nanos| total.checked_add(nanos))
            .ok_or_else(overflow)?;
        total = total
            .checked_add(fraction_nanos(fraction, unit_nanos))
            .ok_or_else(overflow)?;
        rest = next;
    }
    if total > i64::MAX as u128 {
        return Err(overflow());
    }
    if negative && total > 0 {
        return Err(DurationError::Negative(input.to_owned()));
    }
    u64::try_from(total)
        .map(Duration::from_nanos)
        .map_err(|_| overflow())
}

fn split_digits(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    text.split_at(end)
}

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        // Go accepts the micro sign (U+00B5) and the Greek mu (U+03BC) as well as "us".
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// `0.<fraction>` of a unit in nanoseconds, truncated like Go (digits past nanosecond precision drop).
fn fraction_nanos(fraction: &str, unit_nanos: u128) -> u128 {
    // 19 digits keep `digits * unit_nanos` (at most 10^19 * 3.6 * 10^12) far inside u128.
    let digits = &fraction[..fraction.len().min(19)];
    if digits.is_empty() {
        return 0;
    }
    let scale = 10u128.pow(digits.len() as u32);
    digits
        .bytes()
        .fold(0u128, |acc, digit| acc * 10 + u128::from(digit - b'0'))
        * unit_nanos
        / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("5m", Duration::from_secs(300)),
            ("5m0s", Duration::from_secs(300)),
            ("10s", Duration::from_secs(10)),
            ("1h30m", Duration::from_secs(5400)),
            ("1h0m0s", Duration::from_secs(3600)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("1.s", Duration::from_secs(1)),
            ("500ms", Duration::from_millis(500)),
            ("2us", Duration::from_micros(2)),
            ("2µs", Duration::from_micros(2)),
            ("2μs", Duration::from_micros(2)),
            ("7ns", Duration::from_nanos(7)),
            ("+3s", Duration::from_secs(3)),
            ("1h1m1s1ms", Duration::from_millis(3_661_001)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("0.0000000019s", Duration::from_nanos(1)),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), Ok(want), "{input}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        assert_eq!(parse(""), Err(DurationError::Empty));
        assert_eq!(parse("-"), Err(DurationError::Syntax("-".into())));
        assert_eq!(parse("5"), Err(DurationError::MissingUnit("5".into())));
        assert_eq!(parse("1h5"), Err(DurationError::MissingUnit("1h5".into())));
        assert!(matches!(parse("5d"), Err(DurationError::UnknownUnit { unit, .. }) if unit == "d"));
        assert_eq!(parse(".s"), Err(DurationError::Syntax(".s".into())));
        assert_eq!(parse("s"), Err(DurationError::Syntax("s".into())));
        assert_eq!(parse("-5m"), Err(DurationError::Negative("-5m".into())));
        assert_eq!(parse(" 5m"), Err(DurationError::Syntax(" 5m".into())));
        // Go's limit is 2^63-1 ns, about 2562047h.
        assert!(parse("2562047h").is_ok());
        assert_eq!(
            parse("2562048h"),
            Err(DurationError::Overflow("2562048h".into()))
        );
        assert!(matches!(
            parse("99999999999999999999999999999999999999999h"),
            Err(DurationError::Overflow(_))
        ));
    }

    /// The certificate lifetimes the operator's resources carry, as upstream manifests spell them.
    #[test]
    fn parses_the_spellings_upstream_manifests_use() {
        assert_eq!(parse("8760h"), Ok(Duration::from_secs(8760 * 3600)));
        assert_eq!(parse("720h0m0s"), Ok(Duration::from_secs(720 * 3600)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        for bad in ["10", "10d", "", "h"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// kcp-bench's flags (`--duration`, `--drain`, ...).
    #[test]
    fn bench_flags() {
        assert_eq!(parse_or_seconds("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_or_seconds("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_or_seconds("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_or_seconds("1.5"), Ok(Duration::from_millis(1500)));
        // hours, which kcp-bench's own parser refused, are Go syntax like the rest
        assert_eq!(parse_or_seconds("10h"), Ok(Duration::from_secs(36_000)));
        for bad in ["", "s", "-1s", "ten"] {
            assert!(parse_or_seconds(bad).is_err(), "{bad}");
        }
    }

    /// The node agent's flags (`--max-backoff`, `--resync`).
    #[test]
    fn node_agent_flags() {
        assert_eq!(parse_or_seconds("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_or_seconds("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_or_seconds("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_or_seconds("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_or_seconds("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_or_seconds(" 90 "), Ok(Duration::from_secs(90)));
        assert!(parse_or_seconds("5d").is_err());
        assert!(parse_or_seconds("x").is_err());
        // only a lone number defaults to seconds
        assert_eq!(
            parse_or_seconds("1m30"),
            Err(DurationError::MissingUnit("1m30".into()))
        );
        assert_eq!(
            parse_or_seconds("-3"),
            Err(DurationError::Negative("-3".into()))
        );
    }
}
