//! Timestamps as Kubernetes writes them (`metav1.Time`: RFC 3339, whole seconds, UTC).

use jiff::Timestamp;

pub fn now() -> Timestamp {
    Timestamp::now()
}

/// `2006-01-02T15:04:05Z`.
pub fn format(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
pub fn parse(text: &str) -> Option<Timestamp> {
    text.parse().ok()
}

/// Seconds from `earlier` to `later` (negative when `later` is before).
pub fn seconds_between(earlier: Timestamp, later: Timestamp) -> f64 {
    (later.as_millisecond() - earlier.as_millisecond()) as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let ts = parse("2024-05-06T07:08:09Z").expect("parse");
        assert_eq!(format(ts), "2024-05-06T07:08:09Z");
        let later = parse("2024-05-06T07:08:19Z").expect("parse");
        assert_eq!(seconds_between(ts, later), 10.0);
    }
}
