//! Go's `%q`, which Kubernetes messages use for values and paths (`unknown field "spec.foo"`): the
//! exact rendering kcp-apimachinery provides, so messages match kube-apiserver byte for byte.

pub(crate) use kcp_apimachinery::gofmt::quote;

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_like_go() {
        assert_eq!(super::quote("spec.foo"), "\"spec.foo\"");
        assert_eq!(super::quote("a\"b"), "\"a\\\"b\"");
        assert_eq!(super::quote("tab\there"), "\"tab\\there\"");
    }
}
