//! Wraps a PKCS#1 RSA private key into PKCS#8.
//!
//! Brought CAs often come from cert-manager or openssl with `BEGIN RSA PRIVATE KEY` (PKCS#1),
//! while rcgen on ring reads only PKCS#8. The wrapping is a fixed ASN.1 envelope, so we do it
//! here instead of asking users to convert their keys.

use kcp_der as der;

/// `AlgorithmIdentifier { rsaEncryption, NULL }`, DER encoded.
const RSA_ALGORITHM_IDENTIFIER: [u8; 15] = [
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
];
/// `INTEGER 0`, the PKCS#8 version.
const VERSION_ZERO: [u8; 3] = [0x02, 0x01, 0x00];

/// `PrivateKeyInfo { 0, rsaEncryption, OCTET STRING pkcs1 }`.
pub fn rsa_pkcs1_to_pkcs8(pkcs1_der: &[u8]) -> Vec<u8> {
    let mut body = VERSION_ZERO.to_vec();
    body.extend_from_slice(&RSA_ALGORITHM_IDENTIFIER);
    body.extend(der::element(der::OCTET_STRING, pkcs1_der));
    der::element(der::SEQUENCE, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_wraps_the_key_in_an_octet_string() {
        let wrapped = rsa_pkcs1_to_pkcs8(&[0xaa, 0xbb]);
        assert_eq!(wrapped[0], 0x30);
        assert_eq!(&wrapped[2..5], &VERSION_ZERO);
        assert_eq!(&wrapped[wrapped.len() - 4..], &[0x04, 0x02, 0xaa, 0xbb]);
    }
}
