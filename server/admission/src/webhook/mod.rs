//! Admission webhooks (work in progress).
