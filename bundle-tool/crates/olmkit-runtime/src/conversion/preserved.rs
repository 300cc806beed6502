//! Keeping the hub fields a spoke cannot express, in an annotation, so round trips lose nothing.
//!
//! A spoke converted from the hub stores what it cannot express in an operator-owned annotation
//! (a JSON document the operator defines, shaped like the hub object so a person reading it
//! recognises the fields); converting the spoke back to the hub reads the annotation, restores
//! the fields and removes it. Two edge cases decide the shape of this module:
//!
//! - **A hub object that itself carries the annotation** (a user copied it, or set a value of
//!   their own) keeps it: [`store`] wraps that value inside the payload ([`Kept::hub_annotation`])
//!   instead of writing it bare, and [`restore`] puts it back, so even a colliding user
//!   annotation survives round trips.
//! - **An unreadable annotation on a spoke** converts as if it were absent (the hub-only fields
//!   take their defaults) and the value stays on the hub object; [`restore`] returns the parse
//!   error for the caller to turn into a warning. Failing instead would make the object
//!   unreadable in every version.
//!
//! Only payloads that hold something are written ([`Kept::is_empty`]), so objects that lose
//! nothing carry no annotation.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The payload a spoke keeps for the way back to the hub.
pub trait Kept: Serialize + DeserializeOwned + Default {
    /// True when it holds no field (then no annotation is written).
    fn is_empty(&self) -> bool;
    /// Where the payload carries the annotation value the hub object itself had.
    fn hub_annotation(&mut self) -> &mut Option<String>;
}

/// Removes annotation `key` from `metadata`, dropping the map if it becomes empty.
pub fn take_annotation(metadata: &mut ObjectMeta, key: &str) -> Option<String> {
    let annotations = metadata.annotations.as_mut()?;
    let value = annotations.remove(key);
    if annotations.is_empty() {
        metadata.annotations = None;
    }
    value
}

fn put_annotation(metadata: &mut ObjectMeta, key: &str, value: String) {
    metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(key.to_string(), value);
}

/// Writes annotation `key` of a spoke converted from the hub: `kept`, plus `hub_annotation` (the
/// value the hub object carried under the same key, if any).
pub fn store<T: Kept>(
    metadata: &mut ObjectMeta,
    key: &str,
    mut kept: T,
    hub_annotation: Option<String>,
) {
    *kept.hub_annotation() = hub_annotation;
    if kept.is_empty() && kept.hub_annotation().is_none() {
        return;
    }
    // Payloads are plain structs with string-keyed maps: serialising them cannot fail.
    if let Ok(text) = serde_json::to_string(&kept) {
        put_annotation(metadata, key, text);
    }
}

/// Reads and removes annotation `key` of a spoke on its way to the hub.
///
/// Returns the payload (default when absent or unreadable) and, when the value does not parse,
/// the parse error; the unreadable value is put back verbatim for the hub object to keep.
pub fn restore<T: Kept>(metadata: &mut ObjectMeta, key: &str) -> (T, Option<serde_json::Error>) {
    let Some(value) = take_annotation(metadata, key) else {
        return (T::default(), None);
    };
    match serde_json::from_str::<T>(&value) {
        Ok(mut kept) => {
            if let Some(original) = kept.hub_annotation().take() {
                put_annotation(metadata, key, original);
            }
            (kept, None)
        }
        Err(e) => {
            put_annotation(metadata, key, value);
            (T::default(), Some(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    const KEY: &str = "demo.example.com/conversion-data";

    #[derive(Serialize, Deserialize, Default, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Payload {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        threads: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotation: Option<String>,
    }

    impl Kept for Payload {
        fn is_empty(&self) -> bool {
            self.threads.is_none()
        }
        fn hub_annotation(&mut self) -> &mut Option<String> {
            &mut self.annotation
        }
    }

    #[test]
    fn nothing_kept_writes_nothing() {
        let mut meta = ObjectMeta::default();
        store(&mut meta, KEY, Payload::default(), None);
        assert_eq!(meta.annotations, None);
        let (kept, err): (Payload, _) = restore(&mut meta, KEY);
        assert_eq!(kept, Payload::default());
        assert!(err.is_none());
    }

    #[test]
    fn kept_fields_and_a_colliding_hub_annotation_round_trip() {
        let mut meta = ObjectMeta::default();
        let kept = Payload {
            threads: Some(8),
            annotation: None,
        };
        store(&mut meta, KEY, kept, Some("users value".into()));
        let (back, err): (Payload, _) = restore(&mut meta, KEY);
        assert!(err.is_none());
        assert_eq!(back.threads, Some(8));
        assert_eq!(
            meta.annotations.unwrap().get(KEY).map(String::as_str),
            Some("users value")
        );
    }

    #[test]
    fn an_unreadable_value_stays_and_is_reported() {
        let mut meta = ObjectMeta::default();
        put_annotation(&mut meta, KEY, "{not json".into());
        let (kept, err): (Payload, _) = restore(&mut meta, KEY);
        assert_eq!(kept, Payload::default());
        assert!(err.is_some());
        assert_eq!(
            meta.annotations.unwrap().get(KEY).map(String::as_str),
            Some("{not json")
        );
    }
}
