//! kubelet's WebSocket variants of exec, spoken on the wire by a small client of this test
//! through the server's `pods/exec`: `v4.base64.channel.k8s.io` and `base64.channel.k8s.io`
//! (text frames: the channel's digit, then base64), `channel.k8s.io` and no subprotocol at all
//! (v1: binary frames, the error channel carries only a failure's text), `v4.channel.k8s.io`
//! (the final `Status` as JSON); every variant reads the terminal size from the resize channel.
//! Each exchange starts with kubelet's empty message on the lowest channel the server writes.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{Host, NS, ROOT};

/// Bounds one exchange; only a guard against a hang.
const EXCHANGE_WITHIN: Duration = Duration::from_secs(60);

struct WireClient {
    io: reqwest::Upgraded,
    base64: bool,
}

/// What the server sent, message by message: (channel, data, was a text frame).
type Received = Vec<(u8, Vec<u8>, bool)>;

impl WireClient {
    /// Opens `pods/exec` of the `main` container of `pod` with `query`, offering `protocols`
    /// (none: no `Sec-WebSocket-Protocol` header); returns the client and the protocol the
    /// server answered (empty when it named none).
    async fn open(host: &Host, pod: &str, query: &str, protocols: &str) -> (WireClient, String) {
        let client = host
            .kcp()
            .admin()
            .client_builder()
            .http1_only()
            .build()
            .expect("an HTTP/1.1 client");
        let url = host.kcp().url(&format!(
            "{ROOT}/api/v1/namespaces/{NS}/pods/{pod}/exec?container=main&{query}"
        ));
        let mut request = client
            .get(url)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
        if !protocols.is_empty() {
            request = request.header("Sec-WebSocket-Protocol", protocols);
        }
        let response = request.send().await.expect("the upgrade request");
        assert_eq!(
            response.status(),
            101,
            "{protocols:?}: {:?}",
            response.headers()
        );
        assert_eq!(
            response.headers()["sec-websocket-accept"],
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        let chosen = response
            .headers()
            .get("sec-websocket-protocol")
            .map(|v| v.to_str().expect("a protocol name").to_owned())
            .unwrap_or_default();
        let io = response.upgrade().await.expect("the upgraded connection");
        let base64 = chosen.contains("base64.");
        (WireClient { io, base64 }, chosen)
    }

    /// Sends `data` on `channel`, masked as a client must, in the protocol's encoding.
    async fn send(&mut self, channel: u8, data: &[u8]) {
        let (opcode, payload) = if self.base64 {
            let mut payload = vec![b'0' + channel];
            payload.extend_from_slice(STANDARD.encode(data).as_bytes());
            (0x1, payload)
        } else {
            let mut payload = vec![channel];
            payload.extend_from_slice(data);
            (0x2, payload)
        };
        assert!(payload.len() < 126, "short messages only");
        let key = [7u8, 1, 9, 3];
        let mut frame = vec![0x80 | opcode, 0x80 | payload.len() as u8];
        frame.extend_from_slice(&key);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        self.io.write_all(&frame).await.expect("sending a frame");
    }

    /// Reads messages until the server's close frame.
    async fn receive_all(mut self) -> Received {
        let mut received = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.io.read_exact(&mut head).await.expect("a frame head");
            let length = match head[1] & 0x7f {
                126 => {
                    let mut extended = [0u8; 2];
                    self.io.read_exact(&mut extended).await.expect("length");
                    usize::from(u16::from_be_bytes(extended))
                }
                127 => panic!("no message this long is expected"),
                short => usize::from(short),
            };
            assert_eq!(head[1] & 0x80, 0, "a server does not mask");
            let mut payload = vec![0u8; length];
            self.io.read_exact(&mut payload).await.expect("a payload");
            let opcode = head[0] & 0x0f;
            if opcode == 0x8 {
                return received;
            }
            let (&first, rest) = payload.split_first().expect("a channel");
            let text = opcode == 0x1;
            if self.base64 {
                assert!(text, "base64 protocols send text frames");
                let data = STANDARD.decode(rest).expect("base64 data");
                received.push((first - b'0', data, text));
            } else {
                assert!(!text, "binary protocols send binary frames");
                received.push((first, rest.to_vec(), text));
            }
        }
    }
}

fn channel_text(received: &Received, channel: u8) -> String {
    received
        .iter()
        .filter(|(c, _, _)| *c == channel)
        .map(|(_, data, _)| String::from_utf8_lossy(data).into_owned())
        .collect()
}

/// Runs `read line; echo out $line; echo err >&2; exit 3` with stdin `hi` over `protocols`.
async fn failing_exchange(host: &Host, pod: &str, protocols: &str) -> (String, Received) {
    let query = "command=sh&command=-c&command=read+l%3B+echo+out+%24l%3B+echo+err+%3E%262%3B+exit+3\
                 &stdin=true&stdout=true&stderr=true";
    let (mut client, chosen) = WireClient::open(host, pod, query, protocols).await;
    client.send(0, b"hi\n").await;
    let received = tokio::time::timeout(EXCHANGE_WITHIN, client.receive_all())
        .await
        .expect("the exchange ended");
    (chosen, received)
}

async fn check_protocol(host: &Host, pod: &str, offered: &str, served: &str, json_status: bool) {
    let (chosen, received) = failing_exchange(host, pod, offered).await;
    assert_eq!(chosen, served, "offered {offered:?}");
    assert_eq!(
        received.first().map(|(c, d, _)| (*c, d.len())),
        Some((1, 0)),
        "{served:?}: first an empty stdout message: {received:?}"
    );
    assert_eq!(channel_text(&received, 1), "out hi\n", "{served:?}");
    assert_eq!(channel_text(&received, 2), "err\n", "{served:?}");
    let error = channel_text(&received, 3);
    if json_status {
        let status: Value = serde_json::from_str(&error).expect("a JSON status");
        assert_eq!(status["reason"], "NonZeroExitCode", "{served:?}: {status}");
        assert_eq!(status["details"]["causes"][0]["message"], "3", "{served:?}");
    } else {
        assert!(
            error.starts_with("command terminated with non-zero exit code")
                && error.ends_with("exit code 3"),
            "{served:?}: a v1 failure is its message: {error:?}"
        );
    }
}

/// v1 says nothing on the error channel when the command succeeds; the resize channel sets the
/// terminal's size.
async fn check_v1_success_and_resize(host: &Host, pod: &str, offered: &str) {
    let query = "command=sh&command=-c&command=read+l%3B+stty+size&stdin=true&stdout=true&tty=true";
    let (mut client, _) = WireClient::open(host, pod, query, offered).await;
    client.send(4, br#"{"Width":100,"Height":30}"#).await;
    // The line follows the resize on another channel: kubelet's order across channels is not
    // promised, so the size is read after the command got its line.
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.send(0, b"go\r").await;
    let received = tokio::time::timeout(EXCHANGE_WITHIN, client.receive_all())
        .await
        .expect("the exchange ended");
    let output = channel_text(&received, 1);
    assert!(output.contains("30 100"), "{offered:?}: {output:?}");
    assert!(
        received.iter().all(|(c, _, _)| *c != 3),
        "{offered:?}: a v1 success sends no status: {received:?}"
    );
}

pub async fn check(host: &Host, pod: &str) {
    check_protocol(
        host,
        pod,
        "v4.base64.channel.k8s.io",
        "v4.base64.channel.k8s.io",
        true,
    )
    .await;
    check_protocol(
        host,
        pod,
        "base64.channel.k8s.io",
        "base64.channel.k8s.io",
        false,
    )
    .await;
    check_protocol(host, pod, "channel.k8s.io", "channel.k8s.io", false).await;
    check_protocol(host, pod, "", "", false).await;
    // The client's order decides, as in kubelet's handshake.
    check_protocol(
        host,
        pod,
        "v4.channel.k8s.io, v5.channel.k8s.io",
        "v4.channel.k8s.io",
        true,
    )
    .await;
    check_v1_success_and_resize(host, pod, "base64.channel.k8s.io").await;
    check_v1_success_and_resize(host, pod, "channel.k8s.io").await;
}
