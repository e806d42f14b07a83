//! ResourceQuota admission (work in progress).
