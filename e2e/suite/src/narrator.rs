//! What the suite prints while it runs: one line per step, with the time since the suite began
//! and since the scenario began, so that someone watching CI sees where it is and where time goes.

use std::time::{Duration, Instant};

/// Prints the steps of the scenarios as they happen.
pub struct Narrator {
    began: Instant,
    scenario: Option<(String, Instant)>,
}

impl Default for Narrator {
    fn default() -> Self {
        Narrator::new()
    }
}

impl Narrator {
    pub fn new() -> Narrator {
        Narrator {
            began: Instant::now(),
            scenario: None,
        }
    }

    /// Starts a scenario: the following steps are counted from here.
    pub fn scenario(&mut self, title: &str) {
        println!("\n[{:>7}] == {title}", seconds(self.began.elapsed()));
        self.scenario = Some((title.to_owned(), Instant::now()));
    }

    /// One step of the current scenario.
    pub fn step(&self, what: &str) {
        let within = self
            .scenario
            .as_ref()
            .map_or(Duration::ZERO, |(_, began)| began.elapsed());
        println!(
            "[{:>7}]    +{:>6} {what}",
            seconds(self.began.elapsed()),
            seconds(within)
        );
    }

    /// How long the current scenario has run.
    pub fn scenario_elapsed(&self) -> Duration {
        self.scenario
            .as_ref()
            .map_or(Duration::ZERO, |(_, began)| began.elapsed())
    }

    pub fn suite_elapsed(&self) -> Duration {
        self.began.elapsed()
    }
}

fn seconds(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}
