//! The suite a second time in CI, on the local host used as a real cluster is (issue 23 item 3):
//! through its kubeconfig, every in-cluster URL reached through the host's Service stand-ins
//! (`kubectl port-forward` to each ready pod, served by the local host's pods/portforward and the
//! node agent), so the code path users run on kind runs here too. A representative subset, to
//! keep CI's budget: the chart install (1), the RootShard with a Kubeconfig and a workspace (2),
//! the full deployment used through the FrontProxy (8), the operator's status page in Chromium
//! (12), a Kubeconfig of every target kind (9): each reaches a different in-cluster service; and
//! the FrontProxy's certificate rotation with a client polling through it (15, about 20 s), where
//! the Service's pods are replaced under the client. The other scenarios drive the operator, not
//! the host's paths (the ordered upgrade, 3, passes this way too, in 80 s more).

use std::process::ExitCode;

use kcp_e2e::host::Choice;

/// The scenarios run through the kubeconfig host.
const THROUGH_KUBECONFIG: [usize; 6] = [1, 2, 8, 12, 9, 15];

fn main() -> ExitCode {
    kcp_e2e::run::run(Choice::LocalAsKubeconfig, Some(&THROUGH_KUBECONFIG))
}
