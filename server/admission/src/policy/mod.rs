//! Admission policies (work in progress).
