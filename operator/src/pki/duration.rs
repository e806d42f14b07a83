//! Go duration strings (`8760h`, `1h30m`, `720h0m0s`), the format upstream manifests use for
//! certificate lifetimes, parsed into [`std::time::Duration`].

use std::time::Duration;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid duration {input:?}: {reason}")]
pub struct ParseDurationError {
    input: String,
    reason: &'static str,
}

/// Parses a non-negative Go duration. Units: `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`.
pub fn parse_go_duration(input: &str) -> Result<Duration, ParseDurationError> {
    let error = |reason| ParseDurationError {
        input: input.to_owned(),
        reason,
    };
    if input == "0" {
        return Ok(Duration::ZERO);
    }
    if input.is_empty() {
        return Err(error("empty"));
    }
    let mut rest = input;
    let mut total_nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(error("expected a number"));
        }
        let value: f64 = rest[..number_len]
            .parse()
            .map_err(|_| error("malformed number"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per_unit = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(error("missing unit")),
            _ => return Err(error("unknown unit")),
        };
        rest = &rest[unit_len..];
        total_nanos += value * nanos_per_unit;
    }
    Ok(Duration::from_nanos(total_nanos.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spellings_upstream_manifests_use() {
        assert_eq!(
            parse_go_duration("8760h"),
            Ok(Duration::from_secs(8760 * 3600))
        );
        assert_eq!(
            parse_go_duration("720h0m0s"),
            Ok(Duration::from_secs(720 * 3600))
        );
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_missing_or_unknown_units() {
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("10d").is_err());
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("h").is_err());
    }
}
