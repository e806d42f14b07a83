//! Every command of `docs/quickstart.md` runs: the page's `sh run` blocks are run in order, as one
//! bash script with `set -euo pipefail`, against a `kcp start` this test starts (the page's own
//! `kcp start` block is what the test does instead), with this build's `kubectl-ws` plugins and
//! kubectl 1.33 on `PATH` as `kubectl`, in a directory whose `.kcp/admin.kubeconfig` is that
//! server's. Every `kubectl` command of the page must be in such a block, so the page and the
//! test cannot drift apart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use kcp_docs::runnable;
use kcp_testing::binaries::workspace_binary;
use kcp_testing::plugins::plugin_dir;
use kcp_testing::{ChildGuard, KcpProcess, Kubectl};

/// Bounds the whole script (a guard against a hung command, not a timed assertion).
const SCRIPT_WITHIN: Duration = Duration::from_secs(300);

fn page() -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../quickstart.md"))
        .expect("docs/quickstart.md")
}

/// The commands of blocks not marked `sh run` that call kubectl.
fn kubectl_not_run(markdown: &str) -> Vec<String> {
    runnable::blocks(markdown)
        .into_iter()
        .filter(|block| !block.is_runnable())
        .flat_map(|block| block.commands())
        .filter(|command| command.split_whitespace().any(|word| word == "kubectl"))
        .collect()
}

#[test]
fn every_kubectl_command_of_the_quickstart_is_in_a_runnable_block() {
    let page = page();
    assert_eq!(kubectl_not_run(&page), Vec::<String>::new());
    assert!(
        runnable::blocks(&page)
            .iter()
            .any(|b| b.is_runnable() && b.text.contains("kubectl")),
        "no runnable kubectl command"
    );
    // The check itself: an unmarked kubectl block is reported.
    let unmarked = format!("{page}\n```sh\nkubectl get pods\n```\n");
    assert_eq!(
        kubectl_not_run(&unmarked),
        vec!["kubectl get pods".to_owned()]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_quickstart_runs_against_kcp_start() {
    let script: String = runnable::blocks(&page())
        .into_iter()
        .filter(runnable::Block::is_runnable)
        .map(|block| format!("# docs/quickstart.md line {}\n{}", block.line, block.text))
        .collect();
    let kcp = workspace_binary("kcp", "kcp");
    let mut server = KcpProcess::start(&kcp, "quickstart", &[]).await;

    let work = tempfile::Builder::new()
        .prefix("kcp-quickstart-")
        .tempdir()
        .expect("dir");
    std::fs::create_dir_all(work.path().join(".kcp")).unwrap();
    std::fs::copy(
        server.kubeconfig(),
        work.path().join(".kcp/admin.kubeconfig"),
    )
    .unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    std::os::unix::fs::symlink(kubectl.binary(), bin.join("kubectl")).unwrap();
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        plugin_dir(&kcp).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let home = work.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let log = work.path().join("script.log");
    let mut bash = ChildGuard::spawn(
        "quickstart script",
        Command::new("bash")
            .args(["-euo", "pipefail", "-x", "-c", &script])
            .current_dir(work.path())
            .env("PATH", path)
            .env("HOME", &home)
            .env_remove("KUBECONFIG"),
        &log,
    );
    let deadline = Instant::now() + SCRIPT_WITHIN;
    let status = loop {
        if let Some(status) = bash.exited() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the quickstart did not finish within {SCRIPT_WITHIN:?}:\n{}",
            bash.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        status.success(),
        "the quickstart failed ({status}):\n{}\nserver log:\n{}",
        bash.log(),
        server.log_tail()
    );
    server.stop().await;
}
