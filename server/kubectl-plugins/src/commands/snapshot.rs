//! `kubectl kcp crd snapshot -f <file|-> --prefix <prefix> [-o yaml|json]`: upstream
//! `snapshot.go`. Reads every CRD of the stream, converts each with [`crate::snapshot`] and prints
//! the APIResourceSchemas; needs no kubeconfig and no server.

use std::io::Read;

use crate::cli::SnapshotArgs;
use crate::documents::{Format, parse_stream, render};
use crate::error::Error;
use crate::snapshot::crd_to_schema;

/// Upstream's `Validate`: every problem at once, aggregated.
fn validate(args: &SnapshotArgs) -> Result<Format, Error> {
    let mut problems = Vec::new();
    if args.filename.is_empty() {
        problems.push("--filename is required".to_owned());
    }
    if args.prefix.is_empty() {
        problems.push("--prefix is required".to_owned());
    }
    let format = match args.output.as_str() {
        "yaml" => Some(Format::Yaml),
        "json" => Some(Format::Json),
        other => {
            problems.push(format!(
                "invalid value {other:?} for --output; valid values are json, yaml"
            ));
            None
        }
    };
    match (problems.as_slice(), format) {
        ([], Some(format)) => Ok(format),
        ([one], _) => Err(Error::msg(one.clone())),
        (many, _) => Err(Error::msg(format!("[{}]", many.join(", ")))),
    }
}

/// The APIResourceSchemas of the CRDs in `input`, rendered as upstream prints them.
pub fn convert(input: &str, prefix: &str, format: Format) -> Result<String, Error> {
    let mut out = String::new();
    for document in parse_stream(input)? {
        let schema = crd_to_schema(&document, prefix)
            .map_err(|e| Error::msg(e.to_string()).context("error converting CRD"))?;
        out.push_str(&render(&schema, format)?);
    }
    Ok(out)
}

pub fn run(args: &SnapshotArgs) -> Result<(), Error> {
    let format = validate(args)?;
    let mut input = String::new();
    if args.filename == "-" {
        std::io::stdin()
            .read_to_string(&mut input)
            .map_err(|e| Error::io("stdin", e))?;
    } else {
        input = std::fs::read_to_string(&args.filename)
            .map_err(|e| Error::msg(format!("error opening {}: {e}", args.filename)))?;
    }
    print!("{}", convert(&input, &args.prefix, format)?);
    Ok(())
}
