//! PEM armour, read and written.
//!
//! Key files handed to the server (`--service-account-key-file`, `--client-ca-file`, ...) mix
//! labels that no single crate reads together: `RSA PUBLIC KEY` (PKCS#1) next to `PUBLIC KEY`,
//! `CERTIFICATE` and three private-key flavours. Reading the armour here keeps every label
//! available to the key parsers, which then decide what each block means.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// One `-----BEGIN <label>-----` ... `-----END <label>-----` block, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PemBlock {
    pub(crate) label: String,
    pub(crate) der: Vec<u8>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PemError {
    #[error("PEM block {label:?} has no END line")]
    Unterminated { label: String },
    #[error("PEM block {label:?} is not valid base64")]
    Base64 { label: String },
    #[error("PEM block {label:?} is encrypted; encrypted keys are not supported")]
    Encrypted { label: String },
}

/// Every block in `text`, in order. Text outside blocks is ignored, as Go's `pem.Decode` does.
pub(crate) fn parse(text: &str) -> Result<Vec<PemBlock>, PemError> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|rest| rest.strip_suffix("-----"))
        else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        let mut terminated = false;
        for line in lines.by_ref() {
            if line == end {
                terminated = true;
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.trim() == "Proc-Type" && value.contains("ENCRYPTED") {
                    return Err(PemError::Encrypted {
                        label: label.to_owned(),
                    });
                }
                continue;
            }
            body.push_str(line);
        }
        if !terminated {
            return Err(PemError::Unterminated {
                label: label.to_owned(),
            });
        }
        let der = STANDARD.decode(body).map_err(|_| PemError::Base64 {
            label: label.to_owned(),
        })?;
        blocks.push(PemBlock {
            label: label.to_owned(),
            der,
        });
    }
    Ok(blocks)
}

/// `der` armoured under `label`, 64 columns wide.
pub(crate) fn encode(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_skips_surrounding_text() {
        let der: Vec<u8> = (0..=200).collect();
        let text = format!("comment\n{}\n{}", encode("A", &der), encode("B B", &[1, 2]));
        let blocks = parse(&text).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].label, "A");
        assert_eq!(blocks[0].der, der);
        assert_eq!(blocks[1].label, "B B");
        assert!(encode("A", &der).lines().all(|line| line.len() <= 64));
    }

    #[test]
    fn rejects_broken_blocks() {
        assert_eq!(
            parse("-----BEGIN X-----\nAAAA\n"),
            Err(PemError::Unterminated {
                label: "X".to_owned()
            })
        );
        assert_eq!(
            parse("-----BEGIN X-----\n!!!\n-----END X-----\n"),
            Err(PemError::Base64 {
                label: "X".to_owned()
            })
        );
        assert!(matches!(
            parse(
                "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nAAAA\n-----END RSA PRIVATE KEY-----\n"
            ),
            Err(PemError::Encrypted { .. })
        ));
        assert_eq!(parse("nothing here").unwrap(), Vec::new());
    }
}
