use std::fs;
use std::os::unix::fs::PermissionsExt;

use rcgen::CertifiedIssuer;
use x509_parser::extensions::GeneralName;

use super::*;
use crate::options::tests::validated;

const GENERATED: &[&str] = &[
    "ca.crt",
    "ca.key",
    "apiserver.crt",
    "apiserver.key",
    "client-ca.crt",
    "client-ca.key",
    "admin.crt",
    "admin.key",
];

fn roots(ca_pem: &str) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    Arc::new(roots)
}

pub(super) fn chain(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

/// What a TLS client trusting `ca_pem` concludes about a server presenting `chain_pem` as `name`.
pub(super) fn verify_server(
    ca_pem: &str,
    chain_pem: &str,
    name: &str,
) -> Result<(), rustls::Error> {
    let verifier = WebPkiServerVerifier::builder_with_provider(roots(ca_pem), crypto_provider())
        .build()
        .unwrap();
    let chain = chain(chain_pem);
    let name = ServerName::try_from(name.to_owned()).unwrap();
    verifier
        .verify_server_cert(&chain[0], &chain[1..], &name, &[], UnixTime::now())
        .map(|_| ())
}

/// What a TLS server trusting `ca_pem` for clients concludes about a client presenting `cert_pem`.
pub(super) fn verify_client(ca_pem: &str, cert_pem: &str) -> Result<(), rustls::Error> {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca_pem), crypto_provider())
        .build()
        .unwrap();
    let chain = chain(cert_pem);
    verifier
        .verify_client_cert(&chain[0], &chain[1..], UnixTime::now())
        .map(|_| ())
}

fn root_flag(dir: &Path) -> String {
    format!("--root-directory={}", dir.display())
}

#[test]
fn generated_material_verifies_and_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let options = validated(&[
        &root_flag(&root),
        "--bind-address=10.0.0.7",
        "--shard-base-url=https://Shard.example.com:6443",
        "--external-hostname=api.example.com:443",
    ]);
    let material = bootstrap(&options).unwrap();

    assert_eq!(
        fs::metadata(&root).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for file in GENERATED {
        let mode = fs::metadata(root.join(file)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }

    // The serving certificate chains to the server CA for every name clients may use.
    for name in [
        "localhost",
        "127.0.0.1",
        "::1",
        "10.0.0.7",
        "shard.example.com",
        "api.example.com",
    ] {
        verify_server(
            &material.server_ca_pem,
            &material.serving_cert_chain_pem,
            name,
        )
        .unwrap_or_else(|err| panic!("{name}: {err}"));
    }
    assert!(
        verify_server(
            &material.server_ca_pem,
            &material.serving_cert_chain_pem,
            "other.example.com"
        )
        .is_err()
    );

    // The admin certificate chains to the client CA, and only as a client.
    let admin = material.admin_client.clone().unwrap();
    let client_ca = material.client_ca_pem.clone().unwrap();
    verify_client(&client_ca, &admin.cert_pem).unwrap();
    assert!(verify_client(&material.server_ca_pem, &admin.cert_pem).is_err());
    assert!(verify_server(&client_ca, &admin.cert_pem, "localhost").is_err());
    assert!(verify_client(&material.server_ca_pem, &material.serving_cert_chain_pem).is_err());
    assert_ne!(client_ca, material.server_ca_pem);

    let admin_der = chain(&admin.cert_pem).remove(0);
    let (_, admin_cert) = x509_parser::parse_x509_certificate(&admin_der).unwrap();
    assert!(names(&admin_der, ADMIN_USER, &[ADMIN_GROUP]));
    assert_eq!(material.user_client, None, "no user battery");
    assert!(!admin_cert.is_ca());
    let serving_der = chain(&material.serving_cert_chain_pem).remove(0);
    let (_, serving_cert) = x509_parser::parse_x509_certificate(&serving_der).unwrap();
    let eku = serving_cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && !eku.client_auth);
    let sans: Vec<String> = serving_cert
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .iter()
        .map(|name| match name {
            GeneralName::DNSName(dns) => (*dns).to_owned(),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => IpAddr::from(<[u8; 4]>::try_from(*bytes).unwrap()).to_string(),
                _ => IpAddr::from(<[u8; 16]>::try_from(*bytes).unwrap()).to_string(),
            },
            other => panic!("unexpected SAN {other:?}"),
        })
        .collect();
    assert_eq!(
        sans,
        [
            "api.example.com",
            "localhost",
            "shard.example.com",
            "10.0.0.7",
            "127.0.0.1",
            "::1"
        ]
    );
    let ca_der = chain(&material.server_ca_pem).remove(0);
    assert!(
        x509_parser::parse_x509_certificate(&ca_der)
            .unwrap()
            .1
            .is_ca()
    );

    // A restart reuses everything.
    assert_eq!(bootstrap(&options).unwrap(), material);
}

#[test]
fn new_names_reissue_only_the_serving_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let before = bootstrap(&validated(&[&root_flag(dir.path())])).unwrap();
    let after = bootstrap(&validated(&[
        &root_flag(dir.path()),
        "--external-hostname=kcp.example.org",
    ]))
    .unwrap();
    assert_eq!(after.server_ca_pem, before.server_ca_pem);
    assert_eq!(after.admin_client, before.admin_client);
    assert_ne!(after.serving_cert_chain_pem, before.serving_cert_chain_pem);
    verify_server(
        &after.server_ca_pem,
        &after.serving_cert_chain_pem,
        "kcp.example.org",
    )
    .unwrap();
}

#[test]
fn unusable_files_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let options = validated(&[&root_flag(dir.path())]);
    let first = bootstrap(&options).unwrap();

    // A garbled certificate is reissued under the same CA.
    fs::write(dir.path().join("admin.crt"), "garbage").unwrap();
    let second = bootstrap(&options).unwrap();
    assert_eq!(second.client_ca_pem, first.client_ca_pem);
    assert_ne!(second.admin_client, first.admin_client);
    verify_client(
        second.client_ca_pem.as_deref().unwrap(),
        &second.admin_client.as_ref().unwrap().cert_pem,
    )
    .unwrap();

    // A key that does not belong to the certificate is reissued.
    fs::write(
        dir.path().join("apiserver.key"),
        KeyPair::generate().unwrap().serialize_pem(),
    )
    .unwrap();
    let third = bootstrap(&options).unwrap();
    assert_ne!(third.serving_cert_chain_pem, second.serving_cert_chain_pem);
    assert_eq!(third.server_ca_pem, second.server_ca_pem);

    // A certificate about to expire is reissued.
    let ca_key =
        KeyPair::from_pem(&fs::read_to_string(dir.path().join("ca.key")).unwrap()).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&third.server_ca_pem, ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    let soon = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .checked_add(jiff::Span::new().days(10))
        .unwrap();
    params.not_after = rcgen::date_time_ymd(
        i32::from(soon.year()),
        soon.month().unsigned_abs(),
        soon.day().unsigned_abs(),
    );
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let expiring = params.signed_by(&leaf_key, &issuer).unwrap().pem();
    fs::write(dir.path().join("apiserver.crt"), &expiring).unwrap();
    fs::write(dir.path().join("apiserver.key"), leaf_key.serialize_pem()).unwrap();
    let fourth = bootstrap(&options).unwrap();
    assert_ne!(fourth.serving_cert_chain_pem, expiring);
    verify_server(
        &fourth.server_ca_pem,
        &fourth.serving_cert_chain_pem,
        "localhost",
    )
    .unwrap();

    // A broken CA is replaced, and everything it signed with it.
    fs::write(dir.path().join("ca.crt"), "garbage").unwrap();
    let fifth = bootstrap(&options).unwrap();
    assert_ne!(fifth.server_ca_pem, fourth.server_ca_pem);
    verify_server(
        &fifth.server_ca_pem,
        &fifth.serving_cert_chain_pem,
        "localhost",
    )
    .unwrap();
    assert_eq!(fifth.admin_client, fourth.admin_client);
}

#[test]
fn the_generated_service_account_key_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let options = validated(&[&root_flag(dir.path())]);
    let first = bootstrap(&options).unwrap();
    assert!(dir.path().join("sa.key").exists());
    let second = bootstrap(&options).unwrap();
    assert_eq!(
        first.service_account_signing_key_pem,
        second.service_account_signing_key_pem
    );
    assert!(
        first
            .service_account_signing_key_pem
            .contains("BEGIN PRIVATE KEY")
    );
}

#[test]
fn given_files_are_used_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    // An intermediate-signed serving certificate, shipped as leaf + intermediate.
    let root_ca = Authority::generate(SERVER_CA).unwrap();
    let mut intermediate_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    intermediate_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    intermediate_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let intermediate = CertifiedIssuer::signed_by(
        intermediate_params,
        KeyPair::generate().unwrap(),
        &root_ca.issuer,
    )
    .unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf_params = CertificateParams::new(vec!["kcp.example.com".to_owned()]).unwrap();
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf = leaf_params.signed_by(&leaf_key, &intermediate).unwrap();
    let chain_pem = format!("{}{}", leaf.pem(), intermediate.pem());
    fs::write(dir.path().join("tls.crt"), &chain_pem).unwrap();
    fs::write(dir.path().join("tls.key"), leaf_key.serialize_pem()).unwrap();
    let client_ca = Authority::generate(CLIENT_CA).unwrap();
    fs::write(dir.path().join("client-ca.pem"), &client_ca.cert_pem).unwrap();
    let sa_key = KeyPair::generate().unwrap().serialize_pem();
    fs::write(dir.path().join("sa.key"), &sa_key).unwrap();

    let state = dir.path().join("state");
    let options = validated(&[
        &root_flag(&state),
        &format!("--tls-cert-file={}/tls.crt", dir.path().display()),
        &format!("--tls-private-key-file={}/tls.key", dir.path().display()),
        &format!("--client-ca-file={}/client-ca.pem", dir.path().display()),
        &format!(
            "--service-account-private-key-file={}/sa.key",
            dir.path().display()
        ),
    ]);
    let material = bootstrap(&options).unwrap();
    assert_eq!(material.service_account_signing_key_pem, sa_key);
    assert_eq!(material.serving_cert_chain_pem, chain_pem);
    assert_eq!(material.serving_key_pem, leaf_key.serialize_pem());
    assert_eq!(
        material.client_ca_pem.as_deref(),
        Some(client_ca.cert_pem.as_str())
    );
    assert_eq!(material.admin_client, None);
    assert_eq!(material.server_ca_pem, intermediate.pem());
    verify_server(&material.server_ca_pem, &chain_pem, "kcp.example.com").unwrap();
    assert!(
        !state.exists(),
        "nothing is generated when everything is given"
    );

    fs::write(dir.path().join("tls.key"), "not a key").unwrap();
    assert!(matches!(
        bootstrap(&options),
        Err(PkiError::NoPrivateKey { .. })
    ));
    fs::write(dir.path().join("tls.key"), leaf_key.serialize_pem()).unwrap();
    fs::write(dir.path().join("client-ca.pem"), "no certificate").unwrap();
    assert!(matches!(
        bootstrap(&options),
        Err(PkiError::NoCertificate { .. })
    ));
}

#[test]
fn without_root_directory_material_lives_in_memory() {
    let options = validated(&["--root-directory=", "--etcd-servers=http://127.0.0.1:2379"]);
    let first = bootstrap(&options).unwrap();
    let second = bootstrap(&options).unwrap();
    assert_ne!(first.server_ca_pem, second.server_ca_pem);
    verify_server(
        &first.server_ca_pem,
        &first.serving_cert_chain_pem,
        "localhost",
    )
    .unwrap();
    verify_client(
        first.client_ca_pem.as_deref().unwrap(),
        &first.admin_client.unwrap().cert_pem,
    )
    .unwrap();
}

#[test]
fn without_admin_battery_no_client_ca_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let options = validated(&[
        &root_flag(dir.path()),
        "--batteries-included=workspace-types",
    ]);
    let material = bootstrap(&options).unwrap();
    assert_eq!(material.client_ca_pem, None);
    assert_eq!(material.admin_client, None);
    assert!(!dir.path().join("client-ca.crt").exists());
}

#[test]
fn the_user_battery_gets_a_client_certificate_in_no_group() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let options = validated(&[&root_flag(&root), "--batteries-included=+user"]);
    let material = bootstrap(&options).unwrap();
    let user = material.user_client.clone().unwrap();
    verify_client(material.client_ca_pem.as_deref().unwrap(), &user.cert_pem).unwrap();
    let user_der = chain(&user.cert_pem).remove(0);
    assert!(names(&user_der, USER_BATTERY_USER, &[]));
    assert!(!names(&user_der, ADMIN_USER, &[ADMIN_GROUP]));
    assert_eq!(
        bootstrap(&options).unwrap().user_client,
        Some(user),
        "reused"
    );
}

#[test]
fn last_block_of_a_chain() {
    let chain = "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n\
                 -----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n";
    assert_eq!(
        last_certificate_block(chain),
        "-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----"
    );
}
