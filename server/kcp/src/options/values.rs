//! Parsers for flag values spelled the way Go's pflag and the Kubernetes option packages spell them.
//!
//! Each parser runs inside clap, so a malformed value fails the command line with the flag's name
//! and exit code 2, exactly like an unknown flag, instead of surfacing later as a runtime error.

use std::convert::Infallible;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;

use http::Uri;
use http::uri::Authority;

/// A path; unlike clap's default it may be empty, because an empty value means "not given" in
/// pflag and kcp-operator renders `--root-directory=` on purpose.
pub fn path(value: &str) -> Result<PathBuf, Infallible> {
    Ok(PathBuf::from(value))
}

/// A boolean as Go's `strconv.ParseBool` reads it.
pub fn go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{value:?} is not a boolean (true or false)")),
    }
}

/// One `Name=bool` item of `--feature-gates`.
pub fn feature_gate(value: &str) -> Result<(String, bool), String> {
    let (name, enabled) = value
        .split_once('=')
        .ok_or_else(|| format!("{value:?} is not of the form Name=true|false"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("{value:?} names no feature gate"));
    }
    Ok((name.to_owned(), go_bool(enabled.trim())?))
}

/// One `key=value` item of a map flag (`--oidc-required-claim`).
pub fn key_value(value: &str) -> Result<(String, String), String> {
    let (key, val) = value
        .split_once('=')
        .ok_or_else(|| format!("{value:?} is not of the form key=value"))?;
    if key.trim().is_empty() {
        return Err(format!("{value:?} has an empty key"));
    }
    Ok((key.trim().to_owned(), val.trim().to_owned()))
}

/// An absolute `http://` or `https://` URL with a host.
pub fn url(value: &str) -> Result<Uri, String> {
    let uri = Uri::from_str(value).map_err(|err| format!("{value:?} is not a URL: {err}"))?;
    match uri.scheme_str() {
        Some("https" | "http") => {}
        _ => return Err(format!("{value:?} must start with https:// or http://")),
    }
    match uri.host() {
        Some(host) if !host.is_empty() => Ok(uri),
        _ => Err(format!("{value:?} has no host")),
    }
}

/// An `https://` URL with a host (OIDC issuers must use TLS).
pub fn https_url(value: &str) -> Result<Uri, String> {
    let uri = url(value)?;
    if uri.scheme_str() == Some("https") {
        Ok(uri)
    } else {
        Err(format!("{value:?} must be an https:// URL"))
    }
}

/// One `--etcd-servers` item: a URL, kept as written because the etcd client takes strings.
pub fn etcd_server(value: &str) -> Result<String, String> {
    url(value).map(|_| value.to_owned())
}

/// A host name or IP address, optionally followed by `:port`; yields the host alone (without IPv6
/// brackets), which is all a certificate's subject alternative names need.
pub fn hostname(value: &str) -> Result<String, String> {
    if let Ok(ip) = IpAddr::from_str(value) {
        return Ok(ip.to_string());
    }
    let authority =
        Authority::from_str(value).map_err(|err| format!("{value:?} is not a host name: {err}"))?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return Err(format!("{value:?} is not a host name"));
    }
    Ok(uri_host(authority.host()))
}

/// The host of a URL as certificates spell it: IPv6 literals without their brackets.
pub fn uri_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned()
}

/// One `--tls-cipher-suites` item: a cipher suite name Go's crypto/tls knows (the secure and the
/// insecure lists), plus the two legacy ChaCha20 aliases Kubernetes accepts.
pub fn cipher_suite(value: &str) -> Result<String, String> {
    const KNOWN: &[&str] = &[
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_RSA_WITH_AES_256_CBC_SHA",
        "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_RSA_WITH_RC4_128_SHA",
    ];
    if KNOWN.contains(&value) {
        Ok(value.to_owned())
    } else {
        Err(format!("unknown TLS cipher suite {value:?}"))
    }
}

/// One `--oidc-signing-algs` item: a JOSE asymmetric signature algorithm.
pub fn signing_alg(value: &str) -> Result<String, String> {
    const KNOWN: &[&str] = &[
        "RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512",
    ];
    if KNOWN.contains(&value) {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "unsupported signing algorithm {value:?} (one of {})",
            KNOWN.join(", ")
        ))
    }
}

/// `--audit-webhook-version`: the only audit event version current Kubernetes sends.
pub fn audit_version(value: &str) -> Result<String, String> {
    if value == "audit.k8s.io/v1" {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "unsupported audit version {value:?} (only audit.k8s.io/v1)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_follow_go() {
        for yes in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(go_bool(yes), Ok(true));
        }
        for no in ["0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(go_bool(no), Ok(false));
        }
        assert!(go_bool("yes").is_err());
        assert!(go_bool("").is_err());
    }

    #[test]
    fn maps_need_keys() {
        assert_eq!(feature_gate("A=true"), Ok(("A".into(), true)));
        assert_eq!(feature_gate(" B = false "), Ok(("B".into(), false)));
        assert!(feature_gate("A").is_err());
        assert!(feature_gate("=true").is_err());
        assert!(feature_gate("A=maybe").is_err());
        assert_eq!(key_value("aud=kcp"), Ok(("aud".into(), "kcp".into())));
        assert_eq!(key_value("k="), Ok(("k".into(), String::new())));
        assert!(key_value("=v").is_err());
    }

    #[test]
    fn urls_need_scheme_and_host() {
        assert!(url("https://root-kcp.kcp.svc.cluster.local:6443").is_ok());
        assert!(url("http://127.0.0.1:2379").is_ok());
        assert!(url("root-kcp:6443").is_err());
        assert!(url("ftp://x").is_err());
        assert!(url("https://").is_err());
        assert!(https_url("http://issuer").is_err());
        assert!(https_url("https://issuer/realms/kcp").is_ok());
        assert_eq!(
            etcd_server("https://etcd:2379"),
            Ok("https://etcd:2379".into())
        );
    }

    #[test]
    fn hostnames_drop_ports_and_brackets() {
        assert_eq!(hostname("api.example.com"), Ok("api.example.com".into()));
        assert_eq!(
            hostname("api.example.com:443"),
            Ok("api.example.com".into())
        );
        assert_eq!(hostname("10.0.0.1"), Ok("10.0.0.1".into()));
        assert_eq!(hostname("::1"), Ok("::1".into()));
        assert_eq!(hostname("[fd00::1]:6443"), Ok("fd00::1".into()));
        assert!(hostname("user@host").is_err());
        assert!(hostname("a b").is_err());
        assert!(hostname("").is_err());
    }

    #[test]
    fn names_come_from_fixed_lists() {
        assert!(cipher_suite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256").is_ok());
        assert!(cipher_suite("TLS_NOPE").is_err());
        assert!(signing_alg("ES256").is_ok());
        assert!(signing_alg("HS256").is_err());
        assert!(audit_version("audit.k8s.io/v1").is_ok());
        assert!(audit_version("audit.k8s.io/v1beta1").is_err());
    }
}
