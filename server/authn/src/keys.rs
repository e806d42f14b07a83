//! Signing and verifying keys for JWS tokens, read from the files and documents Kubernetes uses.
//!
//! A signing key comes from `--service-account-signing-key-file` (PKCS#1, PKCS#8 or SEC1 PEM).
//! Verifying keys come from `--service-account-key-file`, which may hold any mix of public keys,
//! certificates and private keys, or from an OIDC issuer's JWKS. ring does the cryptography; this
//! module only translates between those containers and the raw material ring takes.
//!
//! Key ids follow kube-apiserver: `base64url(sha256(SubjectPublicKeyInfo DER))`, so tokens signed
//! here carry the same `kid` as tokens kube (or kcp) would sign with the same key, and either
//! side's JWKS finds the key.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kcp_der::{self as der, DerError, Reader};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair, RsaPublicKeyComponents};
use serde_json::{Value, json};

use crate::jwt::{self, JwtError};
use crate::pem::{self, PemError};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Pem(#[from] PemError),
    #[error(transparent)]
    Der(#[from] DerError),
    #[error("no supported key found in PEM")]
    NoKey,
    #[error("unsupported key: {0}")]
    Unsupported(&'static str),
    #[error("key rejected: {0}")]
    Rejected(String),
    #[error("invalid JWK: {0}")]
    Jwk(&'static str),
    #[error("invalid certificate in key file")]
    Certificate,
    #[error("signing failed")]
    Signing,
    #[error(transparent)]
    Encoding(#[from] JwtError),
}

impl From<ring::error::KeyRejected> for KeyError {
    fn from(error: ring::error::KeyRejected) -> KeyError {
        KeyError::Rejected(error.to_string())
    }
}

/// The NIST curves JWS names (`ES256`, `ES384`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Curve {
    P256,
    P384,
}

impl Curve {
    fn from_oid(oid: &[u8]) -> Result<Curve, KeyError> {
        match oid {
            der::OID_P256 => Ok(Curve::P256),
            der::OID_P384 => Ok(Curve::P384),
            _ => Err(KeyError::Unsupported(
                "elliptic curve other than P-256/P-384",
            )),
        }
    }

    fn oid(self) -> &'static [u8] {
        match self {
            Curve::P256 => der::OID_P256,
            Curve::P384 => der::OID_P384,
        }
    }

    fn jwk_name(self) -> &'static str {
        match self {
            Curve::P256 => "P-256",
            Curve::P384 => "P-384",
        }
    }

    fn coordinate_len(self) -> usize {
        match self {
            Curve::P256 => 32,
            Curve::P384 => 48,
        }
    }

    fn jws_alg(self) -> &'static str {
        match self {
            Curve::P256 => "ES256",
            Curve::P384 => "ES384",
        }
    }

    fn signing(self) -> &'static signature::EcdsaSigningAlgorithm {
        match self {
            Curve::P256 => &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            Curve::P384 => &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
        }
    }
}

/// A private key that signs JWS tokens: RSA (`RS256`) or ECDSA P-256/P-384 (`ES256`/`ES384`).
pub enum SigningKey {
    Rsa(Box<RsaKeyPair>),
    EcP256(EcdsaKeyPair),
    EcP384(EcdsaKeyPair),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.algorithm())
            .field("kid", &self.verifying_key().key_id())
            .finish()
    }
}

impl SigningKey {
    /// The first private key in `pem`: `RSA PRIVATE KEY` (PKCS#1), `PRIVATE KEY` (PKCS#8, RSA or
    /// EC) or `EC PRIVATE KEY` (SEC1).
    pub fn from_pem(pem: &str) -> Result<SigningKey, KeyError> {
        for block in pem::parse(pem)? {
            if let Some(key) = SigningKey::from_block(&block.label, &block.der)? {
                return Ok(key);
            }
        }
        Err(KeyError::NoKey)
    }

    /// A fresh P-256 key and its PKCS#8 PEM, for servers that mint their own signing key.
    pub fn generate_es256() -> Result<(SigningKey, String), KeyError> {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(Curve::P256.signing(), &SystemRandom::new())
            .map_err(|_| KeyError::Signing)?;
        let key = SigningKey::from_pkcs8(pkcs8.as_ref())?;
        Ok((key, pem::encode("PRIVATE KEY", pkcs8.as_ref())))
    }

    /// `Ok(None)` for blocks that are not private keys.
    fn from_block(label: &str, der: &[u8]) -> Result<Option<SigningKey>, KeyError> {
        Ok(Some(match label {
            "RSA PRIVATE KEY" => SigningKey::Rsa(Box::new(RsaKeyPair::from_der(der)?)),
            "PRIVATE KEY" => SigningKey::from_pkcs8(der)?,
            "EC PRIVATE KEY" => SigningKey::from_sec1(der)?,
            _ => return Ok(None),
        }))
    }

    fn from_pkcs8(der: &[u8]) -> Result<SigningKey, KeyError> {
        // PrivateKeyInfo ::= SEQUENCE { version, AlgorithmIdentifier, privateKey OCTET STRING, ... }
        let mut info = Reader::new(Reader::new(der).read(der::SEQUENCE)?);
        info.read(der::INTEGER)?;
        let mut algorithm = Reader::new(info.read(der::SEQUENCE)?);
        match algorithm.read(der::OID)? {
            der::OID_RSA_ENCRYPTION => Ok(SigningKey::Rsa(Box::new(RsaKeyPair::from_pkcs8(der)?))),
            der::OID_EC_PUBLIC_KEY => {
                let curve = Curve::from_oid(algorithm.read(der::OID)?)?;
                let key = EcdsaKeyPair::from_pkcs8(curve.signing(), der, &SystemRandom::new())?;
                Ok(SigningKey::ec(curve, key))
            }
            _ => Err(KeyError::Unsupported(
                "private key algorithm other than RSA/EC",
            )),
        }
    }

    fn from_sec1(der: &[u8]) -> Result<SigningKey, KeyError> {
        // ECPrivateKey ::= SEQUENCE { version, privateKey OCTET STRING,
        //                             [0] parameters OPTIONAL, [1] publicKey OPTIONAL }
        let mut key = Reader::new(Reader::new(der).read(der::SEQUENCE)?);
        key.read(der::INTEGER)?;
        let private = key.read(der::OCTET_STRING)?;
        let mut curve = None;
        let mut public = None;
        while !key.is_empty() {
            match key.peek_tag() {
                Some(der::CONTEXT_0) => {
                    let oid = Reader::new(key.read(der::CONTEXT_0)?).read(der::OID)?;
                    curve = Some(Curve::from_oid(oid)?);
                }
                Some(der::CONTEXT_1) => {
                    public = Some(Reader::new(key.read(der::CONTEXT_1)?).read_bit_string()?);
                }
                _ => return Err(DerError::Structure("unexpected field in EC private key").into()),
            }
        }
        let curve = curve.ok_or(KeyError::Unsupported("EC private key without curve"))?;
        let public = public.ok_or(KeyError::Unsupported("EC private key without public key"))?;
        let pair = EcdsaKeyPair::from_private_key_and_public_key(
            curve.signing(),
            private,
            public,
            &SystemRandom::new(),
        )?;
        Ok(SigningKey::ec(curve, pair))
    }

    fn ec(curve: Curve, key: EcdsaKeyPair) -> SigningKey {
        match curve {
            Curve::P256 => SigningKey::EcP256(key),
            Curve::P384 => SigningKey::EcP384(key),
        }
    }

    /// The JWS `alg` this key signs with.
    pub fn algorithm(&self) -> &'static str {
        match self {
            SigningKey::Rsa(_) => "RS256",
            SigningKey::EcP256(_) => Curve::P256.jws_alg(),
            SigningKey::EcP384(_) => Curve::P384.jws_alg(),
        }
    }

    /// The public half, with kube's key id.
    pub fn verifying_key(&self) -> VerifyingKey {
        let material = match self {
            SigningKey::Rsa(key) => {
                let components = RsaPublicKeyComponents::<Vec<u8>>::from(key.public());
                PublicMaterial::Rsa {
                    n: der::strip_leading_zeros(&components.n).to_vec(),
                    e: der::strip_leading_zeros(&components.e).to_vec(),
                }
            }
            SigningKey::EcP256(key) => PublicMaterial::Ec {
                curve: Curve::P256,
                point: key.public_key().as_ref().to_vec(),
            },
            SigningKey::EcP384(key) => PublicMaterial::Ec {
                curve: Curve::P384,
                point: key.public_key().as_ref().to_vec(),
            },
        };
        VerifyingKey::with_computed_kid(material)
    }

    /// A compact JWS over `claims` with header `{"alg", "kid"}`.
    pub fn sign(&self, claims: &Value) -> Result<String, KeyError> {
        let header = json!({"alg": self.algorithm(), "kid": self.verifying_key().key_id()});
        let signing_input = jwt::signing_input(&header, claims)?;
        let rng = SystemRandom::new();
        let signature = match self {
            SigningKey::Rsa(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &rng,
                    signing_input.as_bytes(),
                    &mut signature,
                )
                .map_err(|_| KeyError::Signing)?;
                signature
            }
            SigningKey::EcP256(key) | SigningKey::EcP384(key) => key
                .sign(&rng, signing_input.as_bytes())
                .map_err(|_| KeyError::Signing)?
                .as_ref()
                .to_vec(),
        };
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PublicMaterial {
    /// Big-endian magnitudes without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// Uncompressed SEC1 point.
    Ec { curve: Curve, point: Vec<u8> },
}

/// A public key that verifies JWS signatures, with the key id tokens name it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyingKey {
    kid: String,
    material: PublicMaterial,
}

/// An RSAPublicKey (PKCS#1) DER's modulus and exponent.
fn rsa_components(der: &[u8]) -> Result<PublicMaterial, KeyError> {
    let mut key = Reader::new(Reader::new(der).read(der::SEQUENCE)?);
    let n = key.read_unsigned()?.to_vec();
    let e = key.read_unsigned()?.to_vec();
    if n.is_empty() || e.is_empty() {
        return Err(KeyError::Unsupported("empty RSA modulus or exponent"));
    }
    Ok(PublicMaterial::Rsa { n, e })
}

fn ec_point(curve: Curve, point: &[u8]) -> Result<PublicMaterial, KeyError> {
    if point.len() != 1 + 2 * curve.coordinate_len() || point.first() != Some(&0x04) {
        return Err(KeyError::Unsupported(
            "EC public key that is not an uncompressed point",
        ));
    }
    Ok(PublicMaterial::Ec {
        curve,
        point: point.to_vec(),
    })
}

impl VerifyingKey {
    fn with_computed_kid(material: PublicMaterial) -> VerifyingKey {
        let mut key = VerifyingKey {
            kid: String::new(),
            material,
        };
        let digest = ring::digest::digest(&ring::digest::SHA256, &key.spki_der());
        key.kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
        key
    }

    /// Every key in `pem`, as `--service-account-key-file` reads it: `PUBLIC KEY` (SPKI),
    /// `RSA PUBLIC KEY` (PKCS#1), `CERTIFICATE`, and the public half of private keys. Other blocks
    /// (`EC PARAMETERS`, ...) are skipped; a file without any key is an error.
    pub fn from_pem(pem: &str) -> Result<Vec<VerifyingKey>, KeyError> {
        let mut keys = Vec::new();
        for block in pem::parse(pem)? {
            let key = match block.label.as_str() {
                "PUBLIC KEY" => VerifyingKey::from_spki(&block.der)?,
                "RSA PUBLIC KEY" => VerifyingKey::with_computed_kid(rsa_components(&block.der)?),
                "CERTIFICATE" => {
                    let (_, certificate) = x509_parser::parse_x509_certificate(&block.der)
                        .map_err(|_| KeyError::Certificate)?;
                    VerifyingKey::from_spki(certificate.public_key().raw)?
                }
                label => match SigningKey::from_block(label, &block.der)? {
                    Some(private) => private.verifying_key(),
                    None => continue,
                },
            };
            keys.push(key);
        }
        if keys.is_empty() {
            return Err(KeyError::NoKey);
        }
        Ok(keys)
    }

    /// A SubjectPublicKeyInfo (RSA or EC P-256/P-384).
    pub fn from_spki(der: &[u8]) -> Result<VerifyingKey, KeyError> {
        let mut spki = Reader::new(Reader::new(der).read(der::SEQUENCE)?);
        let mut algorithm = Reader::new(spki.read(der::SEQUENCE)?);
        let oid = algorithm.read(der::OID)?;
        let key = spki.read_bit_string()?;
        let material = match oid {
            der::OID_RSA_ENCRYPTION => rsa_components(key)?,
            der::OID_EC_PUBLIC_KEY => ec_point(Curve::from_oid(algorithm.read(der::OID)?)?, key)?,
            _ => {
                return Err(KeyError::Unsupported(
                    "public key algorithm other than RSA/EC",
                ));
            }
        };
        Ok(VerifyingKey::with_computed_kid(material))
    }

    /// A JWK (`kty` RSA or EC). Its `kid` is kept when present (OIDC issuers choose their own),
    /// otherwise kube's is computed. Keys marked for another `use` than `sig` are refused.
    pub fn from_jwk(jwk: &Value) -> Result<VerifyingKey, KeyError> {
        let field = |name: &'static str| -> Result<Vec<u8>, KeyError> {
            let text = jwk
                .get(name)
                .and_then(Value::as_str)
                .ok_or(KeyError::Jwk("missing key parameter"))?;
            URL_SAFE_NO_PAD
                .decode(text.trim_end_matches('='))
                .map_err(|_| KeyError::Jwk("key parameter is not base64url"))
        };
        if jwk.get("use").is_some_and(|usage| usage != "sig") {
            return Err(KeyError::Jwk("key is not for signatures"));
        }
        let material = match jwk.get("kty").and_then(Value::as_str) {
            Some("RSA") => PublicMaterial::Rsa {
                n: der::strip_leading_zeros(&field("n")?).to_vec(),
                e: der::strip_leading_zeros(&field("e")?).to_vec(),
            },
            Some("EC") => {
                let curve = match jwk.get("crv").and_then(Value::as_str) {
                    Some("P-256") => Curve::P256,
                    Some("P-384") => Curve::P384,
                    _ => return Err(KeyError::Jwk("unsupported curve")),
                };
                let (x, y) = (field("x")?, field("y")?);
                if x.len() != curve.coordinate_len() || y.len() != curve.coordinate_len() {
                    return Err(KeyError::Jwk("EC coordinates have the wrong length"));
                }
                ec_point(curve, &[&[0x04][..], &x, &y].concat())?
            }
            _ => return Err(KeyError::Jwk("unsupported key type")),
        };
        if matches!(&material, PublicMaterial::Rsa { n, e } if n.is_empty() || e.is_empty()) {
            return Err(KeyError::Jwk("empty RSA parameter"));
        }
        let mut key = VerifyingKey::with_computed_kid(material);
        if let Some(kid) = jwk.get("kid").and_then(Value::as_str) {
            key.kid = kid.to_owned();
        }
        Ok(key)
    }

    /// The key id tokens carry in their `kid` header.
    pub fn key_id(&self) -> String {
        self.kid.clone()
    }

    /// The SubjectPublicKeyInfo DER, as Go's `x509.MarshalPKIXPublicKey` writes it.
    pub fn spki_der(&self) -> Vec<u8> {
        match &self.material {
            PublicMaterial::Rsa { n, e } => der::sequence(&[
                &der::sequence(&[
                    &der::element(der::OID, der::OID_RSA_ENCRYPTION),
                    &der::element(der::NULL, &[]),
                ]),
                &der::bit_string(&der::sequence(&[&der::unsigned(n), &der::unsigned(e)])),
            ]),
            PublicMaterial::Ec { curve, point } => der::sequence(&[
                &der::sequence(&[
                    &der::element(der::OID, der::OID_EC_PUBLIC_KEY),
                    &der::element(der::OID, curve.oid()),
                ]),
                &der::bit_string(point),
            ]),
        }
    }

    /// This key as a JWK, the way kube-apiserver publishes it in its JWKS.
    pub fn to_jwk(&self) -> Value {
        match &self.material {
            PublicMaterial::Rsa { n, e } => json!({
                "use": "sig",
                "kty": "RSA",
                "kid": self.kid,
                "alg": "RS256",
                "n": URL_SAFE_NO_PAD.encode(n),
                "e": URL_SAFE_NO_PAD.encode(e),
            }),
            PublicMaterial::Ec { curve, point } => {
                let (x, y) = point[1..].split_at(curve.coordinate_len());
                json!({
                    "use": "sig",
                    "kty": "EC",
                    "kid": self.kid,
                    "crv": curve.jwk_name(),
                    "alg": curve.jws_alg(),
                    "x": URL_SAFE_NO_PAD.encode(x),
                    "y": URL_SAFE_NO_PAD.encode(y),
                })
            }
        }
    }

    /// Whether `signature` over `message` verifies under `alg` with this key. An `alg` that does
    /// not fit the key type (RS256 with an EC key, ES384 with a P-256 key) never verifies.
    pub(crate) fn verifies(&self, alg: &str, message: &[u8], signature: &[u8]) -> bool {
        match &self.material {
            PublicMaterial::Rsa { n, e } => {
                let params: &signature::RsaParameters = match alg {
                    "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                    "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                    "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                    "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
                    "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
                    "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
                    _ => return false,
                };
                RsaPublicKeyComponents { n, e }
                    .verify(params, message, signature)
                    .is_ok()
            }
            PublicMaterial::Ec { curve, point } => {
                let algorithm = match (curve, alg) {
                    (Curve::P256, "ES256") => &signature::ECDSA_P256_SHA256_FIXED,
                    (Curve::P384, "ES384") => &signature::ECDSA_P384_SHA384_FIXED,
                    _ => return false,
                };
                signature::UnparsedPublicKey::new(algorithm, point)
                    .verify(message, signature)
                    .is_ok()
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const RSA_PKCS1: &str = include_str!("../testdata/rsa-pkcs1.pem");
    const RSA_PKCS8: &str = include_str!("../testdata/rsa-pkcs8.pem");
    const RSA_PUBLIC_PKCS1: &str = include_str!("../testdata/rsa-public-pkcs1.pem");
    const RSA_PUBLIC_SPKI: &str = include_str!("../testdata/rsa-public-spki.pem");
    pub(crate) const EC256_SEC1: &str = include_str!("../testdata/ec256-sec1.pem");
    pub(crate) const EC384_SEC1: &str = include_str!("../testdata/ec384-sec1.pem");

    /// `openssl <rsa|ec> -pubout -outform DER | sha256 | base64url`: kube's key ids for the files.
    const RSA_KID: &str = "BKe118bIssKRHvjka3jtZcrQebPYOiV-xWXhyNDtTew";
    const EC256_KID: &str = "mbnxCUuOdRGqSNv_jBrvJJftESCHOUYcyXXVongcTIA";
    const EC384_KID: &str = "L4vR8O2oZbrwxvNP_e3KSaxbGu8TAUa16TAxfvqypf8";

    #[test]
    fn key_ids_match_kube_for_every_container() {
        for (pem, kid, alg) in [
            (RSA_PKCS1, RSA_KID, "RS256"),
            (RSA_PKCS8, RSA_KID, "RS256"),
            (EC256_SEC1, EC256_KID, "ES256"),
            (EC384_SEC1, EC384_KID, "ES384"),
        ] {
            let key = SigningKey::from_pem(pem).unwrap();
            assert_eq!(key.algorithm(), alg);
            assert_eq!(key.verifying_key().key_id(), kid);
            let public = VerifyingKey::from_pem(pem).unwrap();
            assert_eq!(public, vec![key.verifying_key()]);
        }
        for pem in [RSA_PUBLIC_PKCS1, RSA_PUBLIC_SPKI] {
            assert_eq!(VerifyingKey::from_pem(pem).unwrap()[0].key_id(), RSA_KID);
        }
    }

    #[test]
    fn key_files_may_mix_blocks() {
        let both = format!("{RSA_PUBLIC_SPKI}\n{EC256_SEC1}");
        let keys = VerifyingKey::from_pem(&both).unwrap();
        assert_eq!(
            keys.iter().map(VerifyingKey::key_id).collect::<Vec<_>>(),
            vec![RSA_KID, EC256_KID]
        );
        assert!(matches!(
            VerifyingKey::from_pem("no keys"),
            Err(KeyError::NoKey)
        ));
        assert!(matches!(
            SigningKey::from_pem(RSA_PUBLIC_SPKI),
            Err(KeyError::NoKey)
        ));
    }

    #[test]
    fn certificates_yield_their_public_key() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let from_cert = VerifyingKey::from_pem(&cert.pem()).unwrap();
        let from_key = VerifyingKey::from_pem(&key.serialize_pem()).unwrap();
        assert_eq!(from_cert, from_key);
    }

    #[test]
    fn jwk_round_trip_keeps_the_key() {
        for pem in [RSA_PKCS1, EC256_SEC1, EC384_SEC1] {
            let key = SigningKey::from_pem(pem).unwrap().verifying_key();
            let jwk = key.to_jwk();
            assert_eq!(VerifyingKey::from_jwk(&jwk).unwrap(), key);
        }
        let mut jwk = SigningKey::from_pem(EC256_SEC1)
            .unwrap()
            .verifying_key()
            .to_jwk();
        jwk["kid"] = json!("issuer-chosen");
        assert_eq!(
            VerifyingKey::from_jwk(&jwk).unwrap().key_id(),
            "issuer-chosen"
        );
        jwk["use"] = json!("enc");
        assert!(VerifyingKey::from_jwk(&jwk).is_err());
        jwk["use"] = json!("sig");
        jwk["x"] = json!("AAAA");
        assert!(VerifyingKey::from_jwk(&jwk).is_err());
        assert!(VerifyingKey::from_jwk(&json!({"kty": "oct", "k": "AAAA"})).is_err());
    }

    #[test]
    fn generated_keys_reload_from_their_pem() {
        let (key, pem) = SigningKey::generate_es256().unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let reloaded = SigningKey::from_pem(&pem).unwrap();
        assert_eq!(reloaded.verifying_key(), key.verifying_key());
        assert_ne!(
            SigningKey::generate_es256().unwrap().0.verifying_key(),
            key.verifying_key()
        );
    }
}
