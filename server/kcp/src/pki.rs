//! Serving and admin certificates: taken from flags when given, generated (and kept) otherwise.
//!
//! `kcp start` with no flags must give a newcomer a TLS endpoint and an admin kubeconfig that kubectl
//! trusts, and restarting must not invalidate kubeconfigs already handed out. So generated material
//! lives under `--root-directory` and is reused as long as it still fits: each certificate must
//! chain to its CA, match its private key, cover today's names (flags can add host names) and stay
//! valid for a while. Whatever no longer fits is reissued alone, and a CA is replaced only when it
//! is itself unusable. With an empty `--root-directory` the material is generated in memory.
//!
//! Two CAs keep the roles apart: the server CA (`ca.crt`) signs the serving certificate and is what
//! clients trust; the client CA (`client-ca.crt`) signs the admin client certificate and is what the
//! server trusts for client certificates. When `--client-ca-file` is given the server trusts that
//! bundle instead, and since its key is not ours no admin certificate can be minted: the admin
//! kubeconfig then carries the server CA but no client credentials.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
};
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tracing::{info, warn};

use crate::options::batteries::Battery;
use crate::options::values::uri_host;
use crate::options::{CertKeyFiles, ValidatedOptions};
use crate::private_file::{self, PrivateFileError};

/// User name (certificate CN) of the generated admin client certificate.
pub const ADMIN_USER: &str = "shard-admin";
/// Group (certificate O) of the generated admin client certificate: allowed everything.
pub const ADMIN_GROUP: &str = "system:masters";
/// User name of the `user` battery's client certificate: signed in, in no group, so it may do
/// what RBAC grants every authenticated user (as upstream's non-admin `user`).
pub const USER_BATTERY_USER: &str = "user";

/// A certificate is reissued once it expires within this margin.
const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 60 * 60);
const CA_YEARS: i16 = 10;
const LEAF_YEARS: i16 = 1;

const SERVER_CA: AuthorityName = AuthorityName {
    file_stem: "ca",
    common_name: "kcp-server-ca",
};
const CLIENT_CA: AuthorityName = AuthorityName {
    file_stem: "client-ca",
    common_name: "kcp-client-ca",
};
const SERVING_FILE_STEM: &str = "apiserver";
const ADMIN_FILE_STEM: &str = "admin";
const USER_FILE_STEM: &str = "user";
/// The generated service-account signing key, as upstream kcp names it.
const SERVICE_ACCOUNT_KEY_FILE: &str = "sa.key";

/// Everything the TLS listener and the admin kubeconfig need, as PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingMaterial {
    /// The serving certificate, leaf first.
    pub serving_cert_chain_pem: String,
    /// The serving certificate's private key.
    pub serving_key_pem: String,
    /// CAs that client certificates are verified against; `None`: client certificates are not
    /// accepted (no `--client-ca-file` and no admin battery).
    pub client_ca_pem: Option<String>,
    /// What clients should trust to reach this server.
    pub server_ca_pem: String,
    /// What every namespace publishes as `kube-root-ca.crt`: `--root-ca-file`, else
    /// [`server_ca_pem`](Self::server_ca_pem).
    pub root_ca_pem: String,
    /// The generated admin client certificate (CN `shard-admin`, O `system:masters`), if any.
    pub admin_client: Option<PemPair>,
    /// The `user` battery's client certificate (CN `user`, no group), if that battery is on.
    pub user_client: Option<PemPair>,
    /// The key service-account tokens are signed with: `--service-account-signing-key-file`, else
    /// `--service-account-private-key-file`, else a generated ECDSA P-256 key (`sa.key` in the
    /// root directory, reused across restarts so issued tokens stay valid).
    pub service_account_signing_key_pem: String,
    /// The contents of every `--service-account-key-file` (public keys, certificates or private
    /// keys) that verify service-account tokens, besides the signing key itself.
    pub service_account_key_pems: Vec<String>,
}

/// A certificate and its private key, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemPair {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Why serving material could not be loaded or generated.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error(transparent)]
    File(#[from] PrivateFileError),
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: no PEM certificate in it", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{}: no PEM private key in it", path.display())]
    NoPrivateKey { path: PathBuf },
    #[error("generating the {what}: {source}")]
    Generate {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("computing certificate validity: {0}")]
    Clock(#[from] jiff::Error),
}

/// What any of the binary's servers (`kcp start`, `kcp cache-server`) needs for its secure port,
/// from its flags.
#[derive(Debug, Clone)]
pub struct TransportOptions<'a> {
    /// Where generated material is kept; `None`: in memory only.
    pub root_directory: Option<&'a Path>,
    /// `--tls-cert-file` and `--tls-private-key-file`.
    pub tls: Option<&'a CertKeyFiles>,
    /// `--client-ca-file`.
    pub client_ca_file: Option<&'a Path>,
    /// Without `--client-ca-file`: generate a client CA and the admin client certificate.
    pub admin: bool,
    /// With `admin`: the `user` battery's client certificate too.
    pub user: bool,
    /// `--bind-address`, in the serving certificate when it is a specific address.
    pub bind_address: IpAddr,
    /// Other host names clients use for the server.
    pub hosts: Vec<String>,
}

/// The serving certificate, the client CA and the generated client certificates, as PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transport {
    pub serving_cert_chain_pem: String,
    pub serving_key_pem: String,
    /// What clients should trust to reach this server.
    pub server_ca_pem: String,
    /// CAs that client certificates are verified against; `None`: none are accepted.
    pub client_ca_pem: Option<String>,
    pub admin_client: Option<PemPair>,
    pub user_client: Option<PemPair>,
}

/// Loads the serving certificate and client CA the flags name and generates (or reuses, from
/// the root directory) the rest.
pub fn transport(options: &TransportOptions<'_>) -> Result<Transport, PkiError> {
    let store = Store {
        dir: options.root_directory.map(Path::to_path_buf),
    };
    if store.dir.is_none() {
        info!("--root-directory is empty: generated certificates are kept in memory only");
    }
    let (serving_cert_chain_pem, serving_key_pem, server_ca_pem) = match options.tls {
        Some(files) => {
            let chain = read_certificates(&files.cert_file)?;
            let key = read_private_key(&files.key_file)?;
            let top = format!("{}\n", last_certificate_block(&chain));
            (chain, key, top)
        }
        None => {
            let ca = store.authority(SERVER_CA)?;
            let serving = store.leaf(
                &ca,
                SERVING_FILE_STEM,
                &LeafProfile::Serving {
                    names: serving_names(options),
                },
            )?;
            (serving.cert_pem, serving.key_pem, ca.cert_pem)
        }
    };
    let (client_ca_pem, admin_client, user_client) = match options.client_ca_file {
        Some(path) => (Some(read_certificates(path)?), None, None),
        None if options.admin => {
            let ca = store.authority(CLIENT_CA)?;
            let admin = store.leaf(&ca, ADMIN_FILE_STEM, &LeafProfile::Client(ADMIN))?;
            let user = options
                .user
                .then(|| store.leaf(&ca, USER_FILE_STEM, &LeafProfile::Client(USER)))
                .transpose()?;
            (Some(ca.cert_pem), Some(admin), user)
        }
        None => (None, None, None),
    };
    Ok(Transport {
        serving_cert_chain_pem,
        serving_key_pem,
        server_ca_pem,
        client_ca_pem,
        admin_client,
        user_client,
    })
}

/// Loads the serving material named by the flags and generates (or reuses) the rest.
pub fn bootstrap(options: &ValidatedOptions) -> Result<ServingMaterial, PkiError> {
    let mut hosts = Vec::new();
    if let Some(host) = options.shard_base_url.as_ref().and_then(|url| url.host()) {
        hosts.push(uri_host(host));
    }
    hosts.extend(options.external_hostname.iter().cloned());
    let transport = transport(&TransportOptions {
        root_directory: options.root_directory.as_deref(),
        tls: options.tls.as_ref(),
        client_ca_file: options.client_ca_file.as_deref(),
        admin: options.batteries.contains(Battery::Admin),
        user: options.batteries.contains(Battery::User),
        bind_address: options.bind_address,
        hosts,
    })?;
    let store = Store {
        dir: options.root_directory.clone(),
    };
    let service_account_signing_key_pem = match &options.service_account_signing_key_file {
        Some(path) => read_private_key(path)?,
        None => store.service_account_key()?,
    };
    let service_account_key_pems = options
        .service_account_key_files
        .iter()
        .map(|path| read_input(path))
        .collect::<Result<_, _>>()?;
    let root_ca_pem = match &options.root_ca_file {
        Some(path) => read_certificates(path)?,
        None => transport.server_ca_pem.clone(),
    };
    let Transport {
        serving_cert_chain_pem,
        serving_key_pem,
        server_ca_pem,
        client_ca_pem,
        admin_client,
        user_client,
    } = transport;
    Ok(ServingMaterial {
        serving_cert_chain_pem,
        serving_key_pem,
        client_ca_pem,
        server_ca_pem,
        root_ca_pem,
        admin_client,
        user_client,
        service_account_signing_key_pem,
        service_account_key_pems,
    })
}

/// A name a serving certificate is valid for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum SubjectName {
    Dns(String),
    Ip(IpAddr),
}

impl SubjectName {
    fn parse(host: &str) -> Self {
        match host.parse() {
            Ok(ip) => SubjectName::Ip(ip),
            Err(_) => SubjectName::Dns(host.to_ascii_lowercase()),
        }
    }

    fn san(&self) -> Result<SanType, rcgen::Error> {
        Ok(match self {
            SubjectName::Dns(name) => SanType::DnsName(name.as_str().try_into()?),
            SubjectName::Ip(ip) => SanType::IpAddress(*ip),
        })
    }
}

impl fmt::Display for SubjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubjectName::Dns(name) => f.write_str(name),
            SubjectName::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Loopback names, the bind address when it is a specific one, and the host names other parties
/// use for this server (a shard's `--shard-base-url` and `--external-hostname`).
fn serving_names(options: &TransportOptions<'_>) -> BTreeSet<SubjectName> {
    let mut names = loopback_names();
    if !options.bind_address.is_unspecified() {
        names.insert(SubjectName::Ip(options.bind_address));
    }
    names.extend(options.hosts.iter().map(|host| SubjectName::parse(host)));
    names
}

/// `localhost`, `127.0.0.1` and `::1`: every generated serving certificate covers them.
fn loopback_names() -> BTreeSet<SubjectName> {
    BTreeSet::from([
        SubjectName::Dns("localhost".to_owned()),
        SubjectName::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        SubjectName::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ])
}

/// What a leaf certificate is for.
enum LeafProfile {
    Serving {
        names: BTreeSet<SubjectName>,
    },
    /// A client certificate naming `user` (CN) in `groups` (O).
    Client(ClientIdentity),
}

/// Who a client certificate names.
#[derive(Debug, Clone, Copy)]
struct ClientIdentity {
    user: &'static str,
    groups: &'static [&'static str],
    /// For messages: "admin", "user", ...
    what: &'static str,
}

/// The admin of `kcp start`'s generated PKI (`admin.crt`).
const ADMIN: ClientIdentity = ClientIdentity {
    user: ADMIN_USER,
    groups: &[ADMIN_GROUP],
    what: "admin client certificate",
};

/// The unprivileged user of the `user` battery (`user.crt`).
const USER: ClientIdentity = ClientIdentity {
    user: USER_BATTERY_USER,
    groups: &[],
    what: "user client certificate",
};

impl LeafProfile {
    fn what(&self) -> &'static str {
        match self {
            LeafProfile::Serving { .. } => "serving certificate",
            LeafProfile::Client(identity) => identity.what,
        }
    }

    fn params(&self) -> Result<CertificateParams, PkiError> {
        let mut params = CertificateParams::default();
        set_validity(&mut params, LEAF_YEARS)?;
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let mut subject = DistinguishedName::new();
        match self {
            LeafProfile::Serving { names } => {
                subject.push(DnType::CommonName, "kcp");
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                params.subject_alt_names = names
                    .iter()
                    .map(SubjectName::san)
                    .collect::<Result<_, _>>()
                    .map_err(|source| PkiError::Generate {
                        what: self.what(),
                        source,
                    })?;
            }
            LeafProfile::Client(identity) => {
                for group in identity.groups {
                    subject.push(DnType::OrganizationName, *group);
                }
                subject.push(DnType::CommonName, identity.user);
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            }
        }
        params.distinguished_name = subject;
        Ok(params)
    }

    /// Whether an existing certificate (already known to match its key) still serves this purpose
    /// at `at`: it chains to `ca` and, for serving, covers every name; for admin, names the admin.
    fn accepts(
        &self,
        ca: &CertificateDer<'static>,
        leaf: &CertificateDer<'_>,
        at: UnixTime,
    ) -> bool {
        let mut roots = RootCertStore::empty();
        if roots.add(ca.clone()).is_err() {
            return false;
        }
        let roots = Arc::new(roots);
        match self {
            LeafProfile::Serving { names } => {
                let Ok(verifier) =
                    WebPkiServerVerifier::builder_with_provider(roots, crypto_provider()).build()
                else {
                    return false;
                };
                names.iter().all(|name| {
                    ServerName::try_from(name.to_string()).is_ok_and(|server_name| {
                        verifier
                            .verify_server_cert(leaf, &[], &server_name, &[], at)
                            .is_ok()
                    })
                })
            }
            LeafProfile::Client(identity) => {
                let Ok(verifier) =
                    WebPkiClientVerifier::builder_with_provider(roots, crypto_provider()).build()
                else {
                    return false;
                };
                verifier.verify_client_cert(leaf, &[], at).is_ok()
                    && names(leaf, identity.user, identity.groups)
            }
        }
    }
}

/// Whether a client certificate names exactly `user` (CN) in exactly `groups` (O).
fn names(leaf: &CertificateDer<'_>, user: &str, groups: &[&str]) -> bool {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(leaf) else {
        return false;
    };
    let subject = cert.subject();
    let common_names: Vec<_> = subject
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .collect();
    let organizations: Vec<_> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .collect();
    common_names == [user] && organizations == groups
}

fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// File stem and subject of a generated CA.
#[derive(Clone, Copy)]
struct AuthorityName {
    file_stem: &'static str,
    common_name: &'static str,
}

/// A CA that can sign.
struct Authority {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    fn generate(name: AuthorityName) -> Result<Self, PkiError> {
        let what = "certificate authority";
        let generate = |source| PkiError::Generate { what, source };
        let key = KeyPair::generate().map_err(generate)?;
        let mut params = CertificateParams::default();
        set_validity(&mut params, CA_YEARS)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let mut subject = DistinguishedName::new();
        subject.push(DnType::CommonName, name.common_name);
        params.distinguished_name = subject;
        let cert = params.self_signed(&key).map_err(generate)?;
        Ok(Authority {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA in these files, if it is one, matches its key and stays valid past the margin.
    fn reuse(cert_pem: &str, key_pem: &str) -> Option<Self> {
        let (cert_der, key) = matching_pair(cert_pem, key_pem)?;
        let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).ok()?;
        let not_after = u64::try_from(cert.validity().not_after.timestamp()).ok()?;
        if !cert.is_ca() || not_after <= renewal_horizon().as_secs() {
            return None;
        }
        let issuer = Issuer::from_ca_cert_der(&cert_der, key).ok()?;
        Some(Authority {
            cert_pem: cert_pem.to_owned(),
            cert_der,
            issuer,
        })
    }
}

/// Where generated material is kept: a directory, or nowhere (memory only).
struct Store {
    dir: Option<PathBuf>,
}

impl Store {
    fn paths(dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
        (
            dir.join(format!("{stem}.crt")),
            dir.join(format!("{stem}.key")),
        )
    }

    /// The existing certificate and key named `stem`, when both files are there.
    fn existing(&self, stem: &str) -> Result<Option<(String, String)>, PkiError> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let (cert_path, key_path) = Self::paths(dir, stem);
        let cert = private_file::read_if_present(&cert_path)?;
        let key = private_file::read_if_present(&key_path)?;
        Ok(cert.zip(key))
    }

    fn save(&self, stem: &str, cert_pem: &str, key_pem: &str) -> Result<(), PkiError> {
        if let Some(dir) = &self.dir {
            let (cert_path, key_path) = Self::paths(dir, stem);
            // Key first: a crash in between leaves an old certificate with a new key, which fails
            // the key check on the next start and is reissued, never a mismatched pair in use.
            private_file::write(&key_path, key_pem.as_bytes())?;
            private_file::write(&cert_path, cert_pem.as_bytes())?;
            info!(certificate = %cert_path.display(), "wrote generated certificate");
        }
        Ok(())
    }

    /// The generated service-account signing key, created on first use.
    fn service_account_key(&self) -> Result<String, PkiError> {
        let path = self
            .dir
            .as_ref()
            .map(|dir| dir.join(SERVICE_ACCOUNT_KEY_FILE));
        if let Some(path) = &path
            && let Some(pem) = private_file::read_if_present(path)?
            && PrivateKeyDer::from_pem_slice(pem.as_bytes()).is_ok()
        {
            return Ok(pem);
        }
        let key = KeyPair::generate().map_err(|source| PkiError::Generate {
            what: "service-account signing key",
            source,
        })?;
        let pem = key.serialize_pem();
        if let Some(path) = &path {
            private_file::write(path, pem.as_bytes())?;
            info!(key = %path.display(), "wrote generated service-account signing key");
        }
        Ok(pem)
    }

    fn authority(&self, name: AuthorityName) -> Result<Authority, PkiError> {
        if let Some((cert_pem, key_pem)) = self.existing(name.file_stem)? {
            if let Some(authority) = Authority::reuse(&cert_pem, &key_pem) {
                return Ok(authority);
            }
            warn!(
                ca = name.file_stem,
                "existing CA is unusable (invalid, mismatched or expiring): generating a new one"
            );
        }
        let authority = Authority::generate(name)?;
        self.save(
            name.file_stem,
            &authority.cert_pem,
            &authority.issuer.key().serialize_pem(),
        )?;
        Ok(authority)
    }

    fn leaf(&self, ca: &Authority, stem: &str, profile: &LeafProfile) -> Result<PemPair, PkiError> {
        if let Some((cert_pem, key_pem)) = self.existing(stem)? {
            let fits = matching_pair(&cert_pem, &key_pem).is_some_and(|(cert_der, _)| {
                profile.accepts(
                    &ca.cert_der,
                    &cert_der,
                    UnixTime::since_unix_epoch(renewal_horizon()),
                )
            });
            if fits {
                return Ok(PemPair { cert_pem, key_pem });
            }
            info!(
                certificate = stem,
                "existing {} no longer fits: reissuing",
                profile.what()
            );
        }
        let generate = |source| PkiError::Generate {
            what: profile.what(),
            source,
        };
        let key = KeyPair::generate().map_err(generate)?;
        let cert = profile
            .params()?
            .signed_by(&key, &ca.issuer)
            .map_err(generate)?;
        let issued = PemPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        self.save(stem, &issued.cert_pem, &issued.key_pem)?;
        Ok(issued)
    }
}

/// The first certificate of `cert_pem` and the key of `key_pem`, if the key belongs to it.
fn matching_pair(cert_pem: &str, key_pem: &str) -> Option<(CertificateDer<'static>, KeyPair)> {
    let cert_der = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .next()?
        .ok()?;
    let key = KeyPair::from_pem(key_pem).ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).ok()?;
    (cert.public_key().raw == key.subject_public_key_info().as_slice()).then_some((cert_der, key))
}

/// Now plus the renewal margin, as time since the epoch.
fn renewal_horizon() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        + RENEW_BEFORE
}

/// Valid from yesterday (tolerating clock skew between hosts) for `years`.
fn set_validity(params: &mut CertificateParams, years: i16) -> Result<(), PkiError> {
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let from = today.yesterday()?;
    let until = today.checked_add(jiff::Span::new().years(years))?;
    let to_rcgen = |date: jiff::civil::Date| {
        rcgen::date_time_ymd(
            i32::from(date.year()),
            date.month().unsigned_abs(),
            date.day().unsigned_abs(),
        )
    };
    params.not_before = to_rcgen(from);
    params.not_after = to_rcgen(until);
    Ok(())
}

fn read_input(path: &Path) -> Result<String, PkiError> {
    std::fs::read_to_string(path).map_err(|source| PkiError::Read {
        path: path.to_owned(),
        source,
    })
}

/// A PEM file that must hold at least one certificate; returned as written.
fn read_certificates(path: &Path) -> Result<String, PkiError> {
    let text = read_input(path)?;
    match CertificateDer::pem_slice_iter(text.as_bytes()).next() {
        Some(Ok(_)) => Ok(text),
        _ => Err(PkiError::NoCertificate {
            path: path.to_owned(),
        }),
    }
}

/// A PEM file that must hold a private key (PKCS#8, PKCS#1 or SEC1); returned as written.
fn read_private_key(path: &Path) -> Result<String, PkiError> {
    let text = read_input(path)?;
    PrivateKeyDer::from_pem_slice(text.as_bytes())
        .map(|_| text.clone())
        .map_err(|_| PkiError::NoPrivateKey {
            path: path.to_owned(),
        })
}

/// The last certificate block of a PEM chain: the one closest to the root, which is what clients
/// of a server with a given `--tls-cert-file` are best told to trust.
fn last_certificate_block(chain: &str) -> &str {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let start = chain.rfind(BEGIN).unwrap_or(0);
    let end = chain[start..]
        .find(END)
        .map_or(chain.len(), |offset| start + offset + END.len());
    &chain[start..end]
}

pub mod shared;
#[cfg(test)]
mod tests;
