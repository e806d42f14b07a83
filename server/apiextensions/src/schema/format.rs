//! The `format` keyword: which formats the API server enforces and how each is checked.
//!
//! Kubernetes strips formats it does not know from CRD schemas (they are documentation only), so
//! an unknown format must never reject an object; the known ones reject with the same
//! `must be of type <format>` message kube-openapi prints.

use std::net::IpAddr;
use std::sync::LazyLock;

use kcp_apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use regex::Regex;

use crate::schema::node::Type;

/// String formats Kubernetes validates, written without `-` (as go-openapi normalizes them).
const STRING_FORMATS: [&str; 26] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

/// Whether `format` is enforced on a node of type `ty` (otherwise it is ignored).
pub(crate) fn is_known(ty: Option<Type>, format: &str) -> bool {
    match ty {
        None | Some(Type::String) => STRING_FORMATS.contains(&normalize(format).as_str()),
        Some(Type::Integer) => matches!(format, "int32" | "int64"),
        Some(Type::Number) => matches!(format, "float" | "double"),
        _ => false,
    }
}

fn normalize(format: &str) -> String {
    format.replace('-', "")
}

/// The patterns below are literals that the tests prove valid; `None` would reject every value.
fn regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

fn is_match(re: &Option<Regex>, value: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(value))
}

static HOSTNAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static UUID: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID3: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static CREDIT_CARD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$",
    )
});
static SSN: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static HEX_COLOR: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGB_COLOR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let c = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*";
    regex(&format!(r"^rgb\({c},{c},{c}\)$"))
});
static EMAIL: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"^(?:[^<>@\s]+@[^<>@\s]+\.?[^<>@\s]*|[^<>]*<[^<>@\s]+@[^<>@\s]+>)$"));
static URI: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"^(?:[a-zA-Z][a-zA-Z0-9+.\-]*:[^\s]*|/[^\s]*)$"));
static DURATION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"^(?:[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+|0|\d+\s*(?:ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?))$",
    )
});
static DATE_TIME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$")
});

/// Whether string `value` satisfies `format` (already known to be enforced).
pub(crate) fn check_string(format: &str, value: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => value.len() == 24 && value.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_match(&URI, value),
        "email" => is_match(&EMAIL, value),
        "hostname" => value.len() <= 255 && is_match(&HOSTNAME, value),
        "ipv4" => value.parse::<IpAddr>().is_ok() && value.contains('.'),
        "ipv6" => value.parse::<IpAddr>().is_ok() && value.contains(':'),
        "cidr" => is_cidr(value),
        "mac" => is_mac(value),
        "uuid" => is_match(&UUID, value),
        "uuid3" => is_match(&UUID3, value),
        "uuid4" => is_match(&UUID4, value),
        "uuid5" => is_match(&UUID5, value),
        "isbn" => is_isbn10(value) || is_isbn13(value),
        "isbn10" => is_isbn10(value),
        "isbn13" => is_isbn13(value),
        "creditcard" => {
            let digits: String = value.chars().filter(char::is_ascii_digit).collect();
            is_match(&CREDIT_CARD, &digits)
        }
        "ssn" => is_match(&SSN, value),
        "hexcolor" => is_match(&HEX_COLOR, value),
        "rgbcolor" => is_match(&RGB_COLOR, value),
        "byte" => is_base64(value),
        "date" => is_date(value),
        "duration" => is_match(&DURATION, value),
        "datetime" => is_date_time(value),
        "k8sshortname" => is_dns1123_label(value).is_empty(),
        "k8slongname" => is_dns1123_subdomain(value).is_empty(),
        _ => true,
    }
}

fn is_cidr(value: &str) -> bool {
    let Some((ip, bits)) = value.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

fn is_mac(value: &str) -> bool {
    let hex_group =
        |g: &str, len: usize| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit());
    for sep in [':', '-'] {
        let groups: Vec<&str> = value.split(sep).collect();
        if matches!(groups.len(), 6 | 8 | 20) && groups.iter().all(|g| hex_group(g, 2)) {
            return true;
        }
    }
    let groups: Vec<&str> = value.split('.').collect();
    matches!(groups.len(), 3 | 4 | 10) && groups.iter().all(|g| hex_group(g, 4))
}

fn isbn_digits(value: &str) -> Vec<char> {
    value.chars().filter(|c| *c != ' ' && *c != '-').collect()
}

fn is_isbn10(value: &str) -> bool {
    let chars = isbn_digits(value);
    if chars.len() != 10 {
        return false;
    }
    let mut sum = 0;
    for (i, c) in chars.iter().enumerate() {
        let digit = match (c, i) {
            ('X', 9) => 10,
            (c, _) => match c.to_digit(10) {
                Some(d) => d,
                None => return false,
            },
        };
        sum += (10 - i as u32) * digit;
    }
    sum % 11 == 0
}

fn is_isbn13(value: &str) -> bool {
    let chars = isbn_digits(value);
    if chars.len() != 13 {
        return false;
    }
    let mut sum = 0;
    for (i, c) in chars.iter().enumerate() {
        let Some(digit) = c.to_digit(10) else {
            return false;
        };
        sum += if i % 2 == 0 { digit } else { 3 * digit };
    }
    sum % 10 == 0
}

/// Go's `base64.StdEncoding`: padded, strict alphabet.
fn is_base64(value: &str) -> bool {
    let bytes = value.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return false;
    }
    let padding = bytes.iter().rev().take_while(|b| **b == b'=').count();
    padding <= 2
        && bytes[..bytes.len() - padding]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        _ => 0,
    }
}

fn valid_ymd(year: &str, month: &str, day: &str) -> bool {
    match (
        year.parse::<u32>(),
        month.parse::<u32>(),
        day.parse::<u32>(),
    ) {
        (Ok(y), Ok(m), Ok(d)) => d >= 1 && d <= days_in_month(y, m),
        _ => false,
    }
}

fn is_date(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    matches!(parts.as_slice(), [y, m, d] if y.len() == 4 && m.len() == 2 && d.len() == 2
        && [y, m, d].iter().all(|p| p.bytes().all(|b| b.is_ascii_digit()))
        && valid_ymd(y, m, d))
}

fn is_date_time(value: &str) -> bool {
    let Some(caps) = DATE_TIME.as_ref().and_then(|re| re.captures(value)) else {
        return false;
    };
    let field = |i: usize| caps.get(i).map_or("", |m| m.as_str());
    let small = |i: usize, max: u32| field(i).parse::<u32>().is_ok_and(|v| v <= max);
    valid_ymd(field(1), field(2), field(3)) && small(4, 23) && small(5, 59) && small(6, 60)
}

/// Whether integer `value` fits `format` (`int32`/`int64`).
pub(crate) fn integer_fits(format: &str, value: &serde_json::Number) -> bool {
    match format {
        "int32" => value.as_i64().is_some_and(|v| i32::try_from(v).is_ok()),
        "int64" => {
            value.as_i64().is_some()
                || value
                    .as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
        }
        _ => true,
    }
}

/// Whether number `value` fits `format` (`float` is 32-bit).
pub(crate) fn number_fits(format: &str, value: f64) -> bool {
    format != "float" || value.abs() <= f64::from(f32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [
            &HOSTNAME,
            &UUID,
            &UUID3,
            &UUID4,
            &UUID5,
            &CREDIT_CARD,
            &SSN,
            &HEX_COLOR,
            &RGB_COLOR,
            &EMAIL,
            &URI,
            &DURATION,
            &DATE_TIME,
        ] {
            assert!(re.is_some());
        }
    }

    #[test]
    fn unknown_formats_are_ignored() {
        assert!(!is_known(Some(Type::String), "my-format"));
        assert!(is_known(Some(Type::String), "date-time"));
        assert!(is_known(None, "uuid"));
        assert!(is_known(Some(Type::Integer), "int32"));
        assert!(!is_known(Some(Type::Integer), "uuid"));
        assert!(!is_known(Some(Type::Boolean), "int32"));
    }

    #[test]
    fn date_time() {
        assert!(check_string("date-time", "2024-02-29T10:00:00Z"));
        assert!(check_string("date-time", "2024-02-29T10:00:00.123+02:00"));
        assert!(!check_string("date-time", "2023-02-29T10:00:00Z"));
        assert!(!check_string("date-time", "yesterday"));
    }

    #[test]
    fn date() {
        assert!(check_string("date", "2024-01-31"));
        assert!(!check_string("date", "2024-1-31"));
        assert!(!check_string("date", "2024-04-31"));
    }

    #[test]
    fn uuid_byte_and_addresses() {
        assert!(check_string("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(!check_string("uuid", "not-a-uuid"));
        assert!(check_string("byte", "aGVsbG8="));
        assert!(!check_string("byte", "aGVsbG8"));
        assert!(check_string("ipv4", "10.0.0.1"));
        assert!(!check_string("ipv4", "::1"));
        assert!(check_string("ipv6", "::1"));
        assert!(check_string("cidr", "10.0.0.0/8"));
        assert!(!check_string("cidr", "10.0.0.0/33"));
        assert!(check_string("mac", "00:1a:2b:3c:4d:5e"));
        assert!(check_string("hostname", "example.com"));
        assert!(!check_string("hostname", "-bad"));
    }

    #[test]
    fn misc_formats() {
        assert!(check_string("isbn10", "0321751043"));
        assert!(check_string("isbn13", "978-0321751041"));
        assert!(check_string("hexcolor", "#FFF"));
        assert!(check_string("rgbcolor", "rgb(255, 0, 12)"));
        assert!(check_string("ssn", "123-45-6789"));
        assert!(check_string("duration", "1h30m"));
        assert!(check_string("duration", "3 days"));
        assert!(!check_string("duration", "soon"));
        assert!(check_string("k8s-short-name", "abc"));
        assert!(!check_string("k8s-short-name", "a.b"));
        assert!(check_string("uri", "https://example.com/x"));
        assert!(!check_string("uri", "example"));
        assert!(check_string("email", "a@example.com"));
    }

    #[test]
    fn numeric_ranges() {
        assert!(integer_fits("int32", &serde_json::Number::from(5)));
        assert!(!integer_fits(
            "int32",
            &serde_json::Number::from(1_i64 << 40)
        ));
        assert!(integer_fits(
            "int64",
            &serde_json::Number::from(1_i64 << 40)
        ));
        assert!(!integer_fits("int64", &serde_json::Number::from(u64::MAX)));
        assert!(number_fits("float", 1.5));
        assert!(!number_fits("float", 1e300));
    }
}
