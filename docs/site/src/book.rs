//! Builds the book with `mdbook-driver` (the library behind the `mdbook` command, HTML renderer
//! only) into a directory of the caller's choosing, and returns every warning mdBook logged
//! (through `tracing`: a missing chapter, a broken `{{#include}}`, an unknown config key, ...),
//! so that a caller can fail on them like `mdbook build` never does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use mdbook_driver::MDBook;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Why the book did not build.
#[derive(Debug, thiserror::Error)]
pub enum BookError {
    #[error("loading the book in {dir}: {message}")]
    Load { dir: PathBuf, message: String },
    #[error("building the book: {0}")]
    Build(String),
}

/// Records the message of every event at WARN or above.
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if self.0.is_empty() || field.name() == "message" {
            self.0 = format!("{value:?}");
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}

impl<S: Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if *event.metadata().level() <= Level::WARN {
            let mut message = Message(String::new());
            event.record(&mut message);
            if let Ok(mut warnings) = self.0.lock() {
                warnings.push(format!("{}: {}", event.metadata().level(), message.0));
            }
        }
    }
}

/// Builds the book whose `book.toml` is in `root` into `out` (instead of its configured build
/// directory); the warnings mdBook logged on the way, or why it failed.
pub fn build(root: &Path, out: &Path) -> Result<Vec<String>, BookError> {
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Warnings(warnings.clone()));
    tracing::subscriber::with_default(subscriber, || {
        let mut book = MDBook::load(root).map_err(|error| BookError::Load {
            dir: root.to_owned(),
            message: format!("{error:#}"),
        })?;
        book.config.build.build_dir = out.to_owned();
        book.build()
            .map_err(|error| BookError::Build(format!("{error:#}")))
    })?;
    let warnings = warnings
        .lock()
        .map(|warnings| warnings.clone())
        .unwrap_or_default();
    Ok(warnings)
}
