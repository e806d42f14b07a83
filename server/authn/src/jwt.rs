//! JWS compact serialization: `base64url(header).base64url(claims).base64url(signature)`.
//!
//! Service-account and OIDC tokens are both JWS; this module checks the envelope and the
//! signature and nothing else. What the claims mean (issuer, audience, lifetime) is for the
//! authenticator that owns the token kind.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::keys::VerifyingKey;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("token is not a compact JWS (three dot-separated segments)")]
    Malformed,
    #[error("token {0} is not base64url")]
    Base64(&'static str),
    #[error("token {0} is not a JSON object")]
    Json(&'static str),
    #[error("token header has no alg")]
    MissingAlg,
    #[error("unsigned tokens (alg none) are not accepted")]
    AlgNone,
    #[error("signing algorithm {0:?} is not allowed")]
    AlgNotAllowed(String),
    #[error("no key to verify the token with")]
    NoKeys,
    #[error("token signature is invalid")]
    InvalidSignature,
    #[error("claims cannot be encoded")]
    Encode,
}

/// A token split into its decoded parts, signature not yet checked.
struct Parts<'a> {
    header: Value,
    claims: Value,
    signing_input: &'a str,
    signature: Vec<u8>,
}

fn decode_json(segment: &str, name: &'static str) -> Result<Value, JwtError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| JwtError::Base64(name))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) if value.is_object() => Ok(value),
        _ => Err(JwtError::Json(name)),
    }
}

fn split(token: &str) -> Result<Parts<'_>, JwtError> {
    let mut segments = token.split('.');
    let (Some(header), Some(claims), Some(signature), None) = (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) else {
        return Err(JwtError::Malformed);
    };
    Ok(Parts {
        header: decode_json(header, "header")?,
        claims: decode_json(claims, "payload")?,
        signing_input: &token[..header.len() + 1 + claims.len()],
        signature: URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| JwtError::Base64("signature"))?,
    })
}

/// The claims of a well-formed token WITHOUT checking its signature: only for routing a token to
/// the authenticator of its issuer, which then verifies it.
pub fn unverified_claims(token: &str) -> Result<Value, JwtError> {
    Ok(split(token)?.claims)
}

/// The `kid` header of a well-formed token, unverified: which key to look for.
pub(crate) fn unverified_key_id(token: &str) -> Option<String> {
    let header = split(token).ok()?.header;
    header.get("kid").and_then(Value::as_str).map(str::to_owned)
}

/// The verified claims of `token`: its `alg` must be in `allowed_algs` (never `none`), and its
/// signature must verify with one of `keys`, trying the key its `kid` names first.
pub fn verify(
    token: &str,
    keys: &[VerifyingKey],
    allowed_algs: &[&str],
) -> Result<Value, JwtError> {
    let parts = split(token)?;
    let alg = parts
        .header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or(JwtError::MissingAlg)?;
    if alg.eq_ignore_ascii_case("none") {
        return Err(JwtError::AlgNone);
    }
    if !allowed_algs.contains(&alg) {
        return Err(JwtError::AlgNotAllowed(alg.to_owned()));
    }
    if keys.is_empty() {
        return Err(JwtError::NoKeys);
    }
    let kid = parts.header.get("kid").and_then(Value::as_str);
    let named = keys.iter().filter(|key| Some(key.key_id().as_str()) == kid);
    let others = keys.iter().filter(|key| Some(key.key_id().as_str()) != kid);
    if named
        .chain(others)
        .any(|key| key.verifies(alg, parts.signing_input.as_bytes(), &parts.signature))
    {
        Ok(parts.claims)
    } else {
        Err(JwtError::InvalidSignature)
    }
}

/// `base64url(header).base64url(claims)`, the bytes a signature covers.
pub(crate) fn signing_input(header: &Value, claims: &Value) -> Result<String, JwtError> {
    let header = serde_json::to_vec(header).map_err(|_| JwtError::Encode)?;
    let claims = serde_json::to_vec(claims).map_err(|_| JwtError::Encode)?;
    Ok(format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::keys::SigningKey;
    use crate::keys::tests::{EC256_SEC1, EC384_SEC1, RSA_PKCS1};

    const ALL: &[&str] = &["RS256", "RS384", "RS512", "ES256", "ES384"];

    fn claims() -> Value {
        json!({"iss": "me", "sub": "you", "n": 1})
    }

    #[test]
    fn signs_and_verifies_rs256_es256_es384() {
        for pem in [RSA_PKCS1, EC256_SEC1, EC384_SEC1] {
            let key = SigningKey::from_pem(pem).unwrap();
            let token = key.sign(&claims()).unwrap();
            let header = decode_json(token.split('.').next().unwrap(), "header").unwrap();
            assert_eq!(header["alg"], key.algorithm());
            assert_eq!(header["kid"], key.verifying_key().key_id());
            assert_eq!(
                verify(&token, &[key.verifying_key()], ALL).unwrap(),
                claims()
            );
            assert_eq!(
                verify(&token, &[key.verifying_key()], &["PS256"]),
                Err(JwtError::AlgNotAllowed(key.algorithm().to_owned()))
            );
        }
    }

    #[test]
    fn verifies_pss_signatures() {
        let SigningKey::Rsa(pair) = SigningKey::from_pem(RSA_PKCS1).unwrap() else {
            panic!("an RSA key");
        };
        let input = signing_input(&json!({"alg": "PS256"}), &claims()).unwrap();
        let mut signature = vec![0; pair.public().modulus_len()];
        pair.sign(
            &ring::signature::RSA_PSS_SHA256,
            &ring::rand::SystemRandom::new(),
            input.as_bytes(),
            &mut signature,
        )
        .unwrap();
        let token = format!("{input}.{}", URL_SAFE_NO_PAD.encode(&signature));
        let key = SigningKey::Rsa(pair).verifying_key();
        assert_eq!(
            verify(&token, std::slice::from_ref(&key), &["PS256"]).unwrap(),
            claims()
        );
        let relabelled = token.replacen(
            &URL_SAFE_NO_PAD.encode(br#"{"alg":"PS256"}"#),
            &URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256"}"#),
            1,
        );
        assert_eq!(
            verify(&relabelled, &[key], &["PS256", "RS256"]),
            Err(JwtError::InvalidSignature)
        );
    }

    #[test]
    fn finds_the_key_among_several_with_or_without_kid() {
        let keys: Vec<_> = [RSA_PKCS1, EC256_SEC1, EC384_SEC1]
            .iter()
            .map(|pem| SigningKey::from_pem(pem).unwrap())
            .collect();
        let public: Vec<_> = keys.iter().map(SigningKey::verifying_key).collect();
        let token = keys[2].sign(&claims()).unwrap();
        assert!(verify(&token, &public, ALL).is_ok());
        let mut anonymous = public[2].to_jwk();
        anonymous["kid"] = json!("other");
        let renamed = [
            public[0].clone(),
            VerifyingKey::from_jwk(&anonymous).unwrap(),
        ];
        assert!(verify(&token, &renamed, ALL).is_ok());
    }

    #[test]
    fn rejects_tampering_wrong_keys_and_alg_none() {
        let key = SigningKey::from_pem(EC256_SEC1).unwrap();
        let keys = [key.verifying_key()];
        let token = key.sign(&claims()).unwrap();
        let segments: Vec<&str> = token.split('.').collect();

        let forged = URL_SAFE_NO_PAD.encode(br#"{"iss":"me","sub":"admin","n":1}"#);
        let tampered_payload = format!("{}.{forged}.{}", segments[0], segments[2]);
        assert_eq!(
            verify(&tampered_payload, &keys, ALL),
            Err(JwtError::InvalidSignature)
        );

        let mut signature = URL_SAFE_NO_PAD.decode(segments[2]).unwrap();
        signature[5] ^= 1;
        let tampered_signature = format!(
            "{}.{}.{}",
            segments[0],
            segments[1],
            URL_SAFE_NO_PAD.encode(signature)
        );
        assert_eq!(
            verify(&tampered_signature, &keys, ALL),
            Err(JwtError::InvalidSignature)
        );

        let other = SigningKey::from_pem(EC384_SEC1).unwrap().verifying_key();
        assert_eq!(
            verify(&token, &[other], ALL),
            Err(JwtError::InvalidSignature)
        );
        assert_eq!(verify(&token, &[], ALL), Err(JwtError::NoKeys));

        let none = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        assert_eq!(
            verify(
                &format!("{none}.{}.", segments[1]),
                &keys,
                &["none", "ES256"]
            ),
            Err(JwtError::AlgNone)
        );
        let no_alg = URL_SAFE_NO_PAD.encode(br#"{"kid":"x"}"#);
        assert_eq!(
            verify(
                &format!("{no_alg}.{}.{}", segments[1], segments[2]),
                &keys,
                ALL
            ),
            Err(JwtError::MissingAlg)
        );
    }

    #[test]
    fn rejects_malformed_envelopes() {
        let key = SigningKey::from_pem(EC256_SEC1).unwrap();
        let keys = [key.verifying_key()];
        let token = key.sign(&claims()).unwrap();
        let segments: Vec<&str> = token.split('.').collect();
        assert_eq!(verify("abc", &keys, ALL), Err(JwtError::Malformed));
        assert_eq!(
            verify(&format!("{token}.x"), &keys, ALL),
            Err(JwtError::Malformed)
        );
        assert_eq!(
            verify(&format!("{}.{}.**", segments[0], segments[1]), &keys, ALL),
            Err(JwtError::Base64("signature"))
        );
        assert_eq!(
            verify(&format!("{}.%%.{}", segments[0], segments[2]), &keys, ALL),
            Err(JwtError::Base64("payload"))
        );
        let not_json = URL_SAFE_NO_PAD.encode(b"[1]");
        assert_eq!(
            verify(
                &format!("{}.{not_json}.{}", segments[0], segments[2]),
                &keys,
                ALL
            ),
            Err(JwtError::Json("payload"))
        );
        assert_eq!(unverified_claims(&token).unwrap(), claims());
        assert_eq!(
            unverified_key_id(&token),
            Some(key.verifying_key().key_id())
        );
        assert_eq!(unverified_key_id("abc"), None);
    }
}
