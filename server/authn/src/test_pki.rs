//! Throwaway CAs and client certificates for the unit tests.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::CertificateDer;

pub(crate) struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name.push(DnType::CommonName, name);
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    pub(crate) fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A client certificate for `cn` in the organizations `orgs`.
    pub(crate) fn client(&self, cn: &str, orgs: &[&str]) -> CertificateDer<'static> {
        self.client_with(cn, orgs, false)
    }

    /// Like [`Ca::client`], valid only in the year 2000.
    pub(crate) fn expired_client(&self, cn: &str) -> CertificateDer<'static> {
        self.client_with(cn, &[], true)
    }

    fn client_with(&self, cn: &str, orgs: &[&str], expired: bool) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        if !cn.is_empty() {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        // rcgen keeps one value per attribute type; a second O goes in under its raw OID.
        let org_types = [
            DnType::OrganizationName,
            DnType::CustomDnType(vec![2, 5, 4, 10]),
        ];
        for (org, ty) in orgs.iter().zip(org_types) {
            params.distinguished_name.push(ty, *org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2000, 12, 31);
        }
        let key = KeyPair::generate().unwrap();
        params.signed_by(&key, &self.issuer).unwrap().der().clone()
    }
}
