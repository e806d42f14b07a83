//! Hand assembly of Kubernetes protobuf bodies, independent of the library's writer, so tests can
//! compare what the codec writes with bytes built from Go's marshalling rules.

#![allow(dead_code)] // each test binary uses its own part of these helpers

use kcp_apimachinery::protobuf;
use serde_json::Value;

pub fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

pub fn len_field(number: u64, bytes: &[u8]) -> Vec<u8> {
    [
        varint(number << 3 | 2),
        varint(bytes.len() as u64),
        bytes.to_vec(),
    ]
    .concat()
}

pub fn str_field(number: u64, s: &str) -> Vec<u8> {
    len_field(number, s.as_bytes())
}

pub fn varint_field(number: u64, v: u64) -> Vec<u8> {
    [varint(number << 3), varint(v)].concat()
}

/// The `k8s\0` + `runtime.Unknown` envelope around a message.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [str_field(1, api_version), str_field(2, kind)].concat();
    let unknown = [
        len_field(1, &type_meta),
        len_field(2, raw),
        str_field(3, ""),
        str_field(4, ""),
    ]
    .concat();
    [b"k8s\0".to_vec(), unknown].concat()
}

/// `object` encodes to exactly the envelope around `raw` and decodes back from it.
pub fn assert_same_as_go(object: &Value, raw: &[u8]) {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let expected = envelope(api_version, kind, raw);
    assert_eq!(protobuf::encode(object).unwrap(), expected, "{kind}");
    assert_eq!(&protobuf::decode(&expected).unwrap(), object, "{kind}");
}
