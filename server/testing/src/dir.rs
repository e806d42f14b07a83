//! Throwaway directories named after the test that made them, removed when dropped.

use tempfile::TempDir;

/// A fresh directory under the system temp dir, `kcp-test-<label>-XXXX`; dropping it removes it
/// and everything in it. The label makes a directory left by a killed run easy to attribute.
pub fn temp_dir(label: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("kcp-test-{label}-"))
        .tempdir()
        .expect("creating a temporary directory")
}
