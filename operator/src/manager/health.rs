//! What `/healthz` and `/readyz` report.
//!
//! `/healthz` answers while the process runs. `/readyz` is ready on a standby replica (waiting
//! for the lease: it is healthy and ready to take over, and failing it would stall rollouts of a
//! Deployment with several replicas) and on the leader once the caches of every reconciled kind
//! hold their first list; it is not ready while the election starts or the leader's caches
//! fill.

use std::sync::{Mutex, PoisonError};

/// Where the process is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Before the election started (or before the controllers started without one).
    #[default]
    Starting,
    /// Waiting for the lease while another replica leads.
    Standby,
    /// Leading, controllers started, caches still filling.
    Leading,
    /// Leading (or running without leader election) with every cache synced.
    Synced,
}

impl Phase {
    /// Whether `/readyz` answers 200.
    pub fn ready(self) -> bool {
        matches!(self, Phase::Standby | Phase::Synced)
    }

    /// What `/readyz` says.
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Standby => "standby: waiting for the leader lease",
            Phase::Leading => "leading: caches not synced yet",
            Phase::Synced => "leading: caches synced",
        }
    }
}

/// The current [`Phase`], shared by the manager and the probe endpoint.
#[derive(Debug, Default)]
pub struct Health {
    phase: Mutex<Phase>,
}

impl Health {
    pub fn set(&self, phase: Phase) {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = phase;
    }

    pub fn phase(&self) -> Phase {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
