//! CertificateSigningRequest admission (work in progress).
