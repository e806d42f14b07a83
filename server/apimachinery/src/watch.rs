//! The JSON form of a watch event: one `{"type": ..., "object": ...}` document per line, as
//! kube-apiserver's watch encoder writes JSON watches (`ADDED`, `MODIFIED`, `DELETED`,
//! `BOOKMARK`, `ERROR` with a `Status`). Every server that streams watches in JSON frames its
//! events here, so clients see one shape (the protobuf form is [`crate::protobuf`]'s).

use serde_json::{Value, json};

/// One event as the line a JSON watch stream carries (newline included).
pub fn json_event(kind: &str, object: &Value) -> Result<Vec<u8>, serde_json::Error> {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object}))?;
    line.push(b'\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_then_object_then_newline() {
        let line = json_event("ADDED", &json!({"metadata": {"name": "a"}})).unwrap();
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
        );
    }
}
