//! Timestamps in the two wire formats Kubernetes uses.
//!
//! `metav1.Time` (creationTimestamp, deletionTimestamp, conditions) is RFC 3339 in UTC with
//! whole seconds; `metav1.MicroTime` (Lease renewTime, events.k8s.io eventTime) always carries
//! six fractional digits. Producing anything else makes Go clients fail to decode objects, so
//! all timestamps the server writes come from here.

use jiff::{SignedDuration, Timestamp};
use thiserror::Error;

/// Errors from reading or shifting timestamps.
#[derive(Debug, Error)]
pub enum TimeError {
    #[error("invalid RFC 3339 timestamp {input:?}: {source}")]
    Parse { input: String, source: jiff::Error },
    #[error("timestamp {input:?} plus {seconds}s is out of range")]
    OutOfRange { input: String, seconds: i64 },
}

/// `t` as a `metav1.Time` string: `2024-01-02T03:04:05Z`.
pub fn format_rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `t` as a `metav1.MicroTime` string: `2024-01-02T03:04:05.123456Z`.
pub fn format_rfc3339_micro(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Now, as a `metav1.Time` string.
pub fn now_rfc3339() -> String {
    format_rfc3339(Timestamp::now())
}

/// Now, as a `metav1.MicroTime` string.
pub fn now_micro_rfc3339() -> String {
    format_rfc3339_micro(Timestamp::now())
}

/// Parses any RFC 3339 timestamp (any offset, any fractional precision).
pub fn parse_rfc3339(s: &str) -> Result<Timestamp, TimeError> {
    s.parse::<Timestamp>().map_err(|source| TimeError::Parse {
        input: s.to_string(),
        source,
    })
}

/// `ts` shifted by `secs` seconds, as a `metav1.Time` string (e.g. a deletion deadline).
pub fn add_seconds(ts: &str, secs: i64) -> Result<String, TimeError> {
    let shifted = parse_rfc3339(ts)?
        .checked_add(SignedDuration::from_secs(secs))
        .map_err(|_| TimeError::OutOfRange {
            input: ts.to_string(),
            seconds: secs,
        })?;
    Ok(format_rfc3339(shifted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_seconds_and_micros() {
        let t = parse_rfc3339("2024-01-02T03:04:05.123456789Z").unwrap();
        assert_eq!(format_rfc3339(t), "2024-01-02T03:04:05Z");
        assert_eq!(format_rfc3339_micro(t), "2024-01-02T03:04:05.123456Z");
        let whole = parse_rfc3339("2024-01-02T03:04:05Z").unwrap();
        assert_eq!(format_rfc3339_micro(whole), "2024-01-02T03:04:05.000000Z");
    }

    #[test]
    fn now_has_wire_shape() {
        let now = now_rfc3339();
        assert_eq!(now.len(), 20);
        assert!(now.ends_with('Z'));
        let micro = now_micro_rfc3339();
        assert_eq!(micro.len(), 27);
        assert!(parse_rfc3339(&micro).is_ok());
    }

    #[test]
    fn parses_offsets_and_rejects_garbage() {
        let t = parse_rfc3339("2024-01-02T05:04:05+02:00").unwrap();
        assert_eq!(format_rfc3339(t), "2024-01-02T03:04:05Z");
        let err = parse_rfc3339("yesterday").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid RFC 3339 timestamp \"yesterday\"")
        );
    }

    #[test]
    fn adds_seconds() {
        assert_eq!(
            add_seconds("2024-01-01T00:00:00Z", 30).unwrap(),
            "2024-01-01T00:00:30Z"
        );
        assert_eq!(
            add_seconds("2024-01-01T00:00:00Z", -1).unwrap(),
            "2023-12-31T23:59:59Z"
        );
        assert!(matches!(
            add_seconds("2024-01-01T00:00:00Z", i64::MAX),
            Err(TimeError::OutOfRange { .. })
        ));
        assert!(add_seconds("nope", 1).is_err());
    }
}
