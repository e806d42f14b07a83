//! Reading and writing the object streams of `kubectl kcp crd snapshot`, as upstream's
//! `snapshot.go` does with apimachinery's YAML reader and encoders:
//!
//! - input is YAML or JSON, split into documents at lines starting with `---` (only spaces or a
//!   comment may follow the marker); blank documents are skipped (and, unlike upstream, which
//!   fails on them, so are documents holding nothing but comments);
//! - output is each object followed by an empty line and `---`; YAML with every map's keys sorted
//!   (upstream converts its JSON to YAML through a generic map), JSON compact in field order.

use serde_json::{Map, Value};

use crate::error::Error;

/// Output format of `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

/// The non-empty documents of a YAML/JSON stream, each parsed.
pub fn parse_stream(text: &str) -> Result<Vec<Value>, Error> {
    let mut documents = Vec::new();
    let mut current = String::new();
    for line in text.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("---") {
            let rest = rest.trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                return Err(Error::msg(format!(
                    "invalid Yaml document separator: {}",
                    line.trim_end()
                )));
            }
            documents.push(std::mem::take(&mut current));
            continue;
        }
        current.push_str(line);
    }
    documents.push(current);

    let mut parsed = Vec::new();
    for document in documents.iter().filter(|d| !d.trim().is_empty()) {
        let value: Value = yaml_serde::from_str(document)
            .map_err(|e| Error::msg(format!("error parsing document: {e}")))?;
        if !value.is_null() {
            parsed.push(value);
        }
    }
    Ok(parsed)
}

/// One object as upstream prints it, including the trailing separator.
pub fn render(object: &Value, format: Format) -> Result<String, Error> {
    let body = match format {
        Format::Json => {
            let mut json = serde_json::to_string(object)
                .map_err(|e| Error::msg(format!("encoding JSON: {e}")))?;
            json.push('\n');
            json
        }
        Format::Yaml => yaml_serde::to_string(&sorted(object))
            .map_err(|e| Error::msg(format!("encoding YAML: {e}")))?,
    };
    Ok(format!("{body}\n---\n"))
}

/// The same value with the keys of every map in byte order.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let map: Map<String, Value> = entries
                .into_iter()
                .map(|(k, v)| (k.clone(), sorted(v)))
                .collect();
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn splits_documents_like_the_yaml_reader() {
        let text = "# leading comment\na: 1\n---\n\n--- # note\nb: [1, 2]\n---\n# only a comment\n---\n{\"c\": true}\n";
        let docs = parse_stream(text).ok();
        assert_eq!(
            docs,
            Some(vec![
                json!({"a": 1}),
                json!({"b": [1, 2]}),
                json!({"c": true})
            ])
        );
        assert!(parse_stream("a: 1\n---x\n").is_err());
        assert_eq!(parse_stream("").ok(), Some(vec![]));
    }

    #[test]
    fn renders_sorted_yaml_and_ordered_json() {
        let object =
            json!({"kind": "K", "apiVersion": "v", "spec": {"z": 1, "a": [{"y": 1, "b": 2}]}});
        assert_eq!(
            render(&object, Format::Yaml).ok().as_deref(),
            Some("apiVersion: v\nkind: K\nspec:\n  a:\n  - b: 2\n    y: 1\n  z: 1\n\n---\n")
        );
        assert_eq!(
            render(&object, Format::Json).ok().as_deref(),
            Some(
                "{\"kind\":\"K\",\"apiVersion\":\"v\",\"spec\":{\"z\":1,\"a\":[{\"y\":1,\"b\":2}]}}\n\n---\n"
            )
        );
    }
}
