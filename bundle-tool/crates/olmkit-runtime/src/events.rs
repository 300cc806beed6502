//! Events on the objects an operator reconciles, best effort.
//!
//! A reconcile that fails because an event could not be published would retry the real work
//! for a side note, so [`publish`] logs a failure and carries on. Notes are cut to the 1,024
//! characters the API server accepts (events.k8s.io/v1 `note` limit), on a character boundary.
//!
//! ```no_run
//! # async fn demo(recorder: kube::runtime::events::Recorder, obj: k8s_openapi::api::core::v1::ConfigMap) {
//! use kube::Resource;
//! use olmkit_runtime::events::{Note, publish};
//! publish(&recorder, &obj.object_ref(&()), Note::normal("Created", "Reconcile", "created the Deployment")).await;
//! # }
//! ```

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use tracing::warn;

/// The API server's limit on an event's note.
pub const MAX_NOTE: usize = 1024;

/// One event to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Warning (something to look at) or not.
    pub warning: bool,
    /// CamelCase reason, e.g. `Created`.
    pub reason: String,
    /// What the operator was doing, e.g. `Reconcile`.
    pub action: String,
    /// Human-readable message.
    pub message: String,
}

impl Note {
    /// A `Normal` event.
    pub fn normal(reason: &str, action: &str, message: impl Into<String>) -> Self {
        Self {
            warning: false,
            reason: reason.into(),
            action: action.into(),
            message: message.into(),
        }
    }

    /// A `Warning` event.
    pub fn warning(reason: &str, action: &str, message: impl Into<String>) -> Self {
        Self {
            warning: true,
            ..Self::normal(reason, action, message)
        }
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary, ending in `...` when cut.
pub fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max.saturating_sub(3);
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// Publishes `note` about `regarding`; true when the API server took it.
pub async fn publish(recorder: &Recorder, regarding: &ObjectReference, note: Note) -> bool {
    let event = Event {
        type_: if note.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: note.reason,
        note: Some(truncate(note.message, MAX_NOTE)),
        action: note.action,
        secondary: None,
    };
    match recorder.publish(&event, regarding).await {
        Ok(()) => true,
        Err(e) => {
            warn!(object = ?regarding.name, error = %e, "cannot publish event");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("short".into(), 10), "short");
        let cut = truncate("é".repeat(600), MAX_NOTE);
        assert!(
            cut.len() <= MAX_NOTE && cut.ends_with("..."),
            "{}",
            cut.len()
        );
    }
}
