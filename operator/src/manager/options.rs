//! The flags of `kcp-operator run`, named and defaulted like controller-runtime's (and upstream
//! kcp-operator's): `--leader-elect`, `--metrics-bind-address :8080`,
//! `--health-probe-bind-address :8081`, plus the lease timings of Kubernetes components.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use clap::{ArgAction, Args};
use kcp_apimachinery::duration;

/// Where an HTTP endpoint listens: `host:port`, `:port` (every IPv4 interface) or `0` (off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(Option<SocketAddr>);

impl BindAddress {
    /// The socket address, or `None` when the endpoint is off.
    pub fn socket(self) -> Option<SocketAddr> {
        self.0
    }
}

/// A bind address that is neither `host:port`, `:port` nor `0`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid bind address {0:?}: expected IP:port, :port or 0")]
pub struct BindAddressError(String);

fn parse_bind_address(input: &str) -> Result<BindAddress, BindAddressError> {
    if input == "0" {
        return Ok(BindAddress(None));
    }
    let error = || BindAddressError(input.to_owned());
    match input.strip_prefix(':') {
        Some(port) => port
            .parse()
            .map(|port| {
                BindAddress(Some(SocketAddr::new(
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                    port,
                )))
            })
            .map_err(|_| error()),
        None => input
            .parse()
            .map(|address| BindAddress(Some(address)))
            .map_err(|_| error()),
    }
}

/// Flags of the `run` command.
#[derive(Debug, Clone, Args)]
pub struct Options {
    /// Run the controllers only while holding the Lease `kcp-operator`, so one replica
    /// reconciles at a time (`--leader-elect=false` to run without).
    #[arg(
        long,
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_value_t = true,
        default_missing_value = "true"
    )]
    pub leader_elect: bool,
    /// Namespace of the leader Lease [default: $POD_NAMESPACE, else the in-cluster service
    /// account's namespace].
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// How long other replicas wait after the last renewal before taking the lease over
    /// (whole seconds).
    #[arg(long, default_value = "15s", value_parser = duration::parse)]
    pub leader_elect_lease_duration: Duration,
    /// The leader stops (and the process exits) when it could not renew the lease for this long.
    #[arg(long, default_value = "10s", value_parser = duration::parse)]
    pub leader_elect_renew_deadline: Duration,
    /// How often the leader renews the lease and failed lease requests are retried (whole
    /// seconds).
    #[arg(long, default_value = "2s", value_parser = duration::parse)]
    pub leader_elect_retry_period: Duration,
    /// Where `/metrics` listens (`0` turns it off).
    #[arg(long, default_value = ":8080", value_parser = parse_bind_address)]
    pub metrics_bind_address: BindAddress,
    /// Where `/healthz` and `/readyz` listen (`0` turns them off).
    #[arg(long, default_value = ":8081", value_parser = parse_bind_address)]
    pub health_probe_bind_address: BindAddress,
}

/// Lease timings that cannot work together.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TimingError {
    #[error("--leader-elect-lease-duration and --leader-elect-retry-period must be whole seconds")]
    NotWholeSeconds,
    #[error(
        "leader election needs 0 < retry period ({retry:?}) < renew deadline ({renew:?}) < lease duration ({lease:?})"
    )]
    Order {
        retry: Duration,
        renew: Duration,
        lease: Duration,
    },
}

/// Validated lease timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Options {
    /// The lease timings, or why they cannot work.
    pub fn timing(&self) -> Result<Timing, TimingError> {
        let timing = Timing {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        };
        if timing.lease_duration.subsec_nanos() != 0 || timing.retry_period.subsec_nanos() != 0 {
            return Err(TimingError::NotWholeSeconds);
        }
        if timing.retry_period.is_zero()
            || timing.retry_period >= timing.renew_deadline
            || timing.renew_deadline >= timing.lease_duration
        {
            return Err(TimingError::Order {
                retry: timing.retry_period,
                renew: timing.renew_deadline,
                lease: timing.lease_duration,
            });
        }
        Ok(timing)
    }
}

/// The Lease's namespace: the flag, else `$POD_NAMESPACE`, else the service account's
/// namespace file (each only when not blank).
pub fn lease_namespace(
    flag: Option<String>,
    pod_namespace: Option<String>,
    service_account: Option<String>,
) -> Option<String> {
    [flag, pod_namespace, service_account]
        .into_iter()
        .flatten()
        .map(|namespace| namespace.trim().to_owned())
        .find(|namespace| !namespace.is_empty())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        options: Options,
    }

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Command::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
            .map(|command| command.options)
    }

    #[test]
    fn defaults_match_controller_runtime() {
        let options = parse(&[]).expect("parses");
        assert!(options.leader_elect);
        assert_eq!(options.leader_election_namespace, None);
        let all = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        assert_eq!(
            options.metrics_bind_address.socket(),
            Some(SocketAddr::new(all.ip(), 8080))
        );
        assert_eq!(
            options.health_probe_bind_address.socket(),
            Some(SocketAddr::new(all.ip(), 8081))
        );
        let timing = options.timing().expect("valid");
        assert_eq!(
            timing,
            Timing {
                lease_duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
            }
        );
    }

    #[test]
    fn flags() {
        let options = parse(&[
            "--leader-elect=false",
            "--leader-election-namespace",
            "ops",
            "--leader-elect-lease-duration=1m",
            "--leader-elect-renew-deadline=40s",
            "--leader-elect-retry-period=5s",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=127.0.0.1:9440",
        ])
        .expect("parses");
        assert!(!options.leader_elect);
        assert_eq!(options.leader_election_namespace.as_deref(), Some("ops"));
        assert_eq!(options.metrics_bind_address.socket(), None);
        assert_eq!(
            options.health_probe_bind_address.socket(),
            Some("127.0.0.1:9440".parse().expect("address"))
        );
        let timing = options.timing().expect("valid");
        assert_eq!(timing.lease_duration, Duration::from_secs(60));

        assert!(parse(&["--leader-elect"]).expect("parses").leader_elect);
        assert!(
            parse(&["--leader-elect=true"])
                .expect("parses")
                .leader_elect
        );
        assert!(
            parse(&["[::1]:8080"]).is_err(),
            "positional arguments are rejected"
        );
        assert_eq!(
            parse(&["--metrics-bind-address=[::1]:8443"])
                .expect("parses")
                .metrics_bind_address
                .socket(),
            Some("[::1]:8443".parse().expect("address"))
        );
    }

    #[test]
    fn rejects_bad_values() {
        for args in [
            &["--metrics-bind-address=localhost"][..],
            &["--metrics-bind-address=:http"],
            &["--health-probe-bind-address=:99999"],
            &["--leader-elect-lease-duration=15"],
            &["--leader-elect=maybe"],
        ] {
            assert!(parse(args).is_err(), "{args:?} accepted");
        }
    }

    #[test]
    fn timings_must_nest() {
        for (args, expected) in [
            (
                &["--leader-elect-renew-deadline=15s"][..],
                "< renew deadline (15s) < lease duration (15s)",
            ),
            (
                &["--leader-elect-retry-period=10s"],
                "0 < retry period (10s)",
            ),
            (
                &["--leader-elect-retry-period=0s"],
                "0 < retry period (0ns)",
            ),
            (&["--leader-elect-lease-duration=15500ms"], "whole seconds"),
        ] {
            let error = parse(args)
                .expect("parses")
                .timing()
                .expect_err("rejected")
                .to_string();
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn namespace_falls_back() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            lease_namespace(some("flag"), some("env"), some("file")),
            some("flag")
        );
        assert_eq!(
            lease_namespace(None, some("env"), some("file")),
            some("env")
        );
        assert_eq!(
            lease_namespace(None, some(" "), some("kcp-system\n")),
            some("kcp-system")
        );
        assert_eq!(lease_namespace(None, None, None), None);
    }
}
