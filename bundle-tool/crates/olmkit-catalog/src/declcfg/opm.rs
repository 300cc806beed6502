//! What `opm render` does to a catalog between reading and writing it.
//!
//! opm does not echo its input: it decodes every blob into Go structs and `interface{}` values
//! and encodes them again. The observable effects, pinned by the opm v1.73 goldens
//! (`fbc-render/*`), are applied here to a loaded catalog so that our writer gives opm's bytes:
//! - property values (and unknown-schema blobs) lose their key order (Go maps marshal sorted)
//!   and their numbers go through `float64`;
//! - a bundle's `relatedImages` are sorted by image with Go's unstable `sort.Slice`
//!   (`declcfg.ModelRelatedImagesToRelatedImages`-style ordering);
//! - a bundle's `olm.bundle.object` and `olm.csv.metadata` properties move to the end, in their
//!   relative order (opm keeps them apart from the other properties and appends them);
//! - a package icon's base64 data is decoded and re-encoded (Go's `[]byte` JSON form).
//!
//! Our own catalog writer (`catalog_dir`) does not call this: `catalog/` keeps its bytes.

use super::{Bundle, DeclarativeConfig, Property};
use crate::property::{BUNDLE_OBJECT, CSV_METADATA};
use base64::Engine;
use serde_json::{Map, Number, Value};

/// Applies opm's decode/encode effects to every blob of `cfg`.
pub fn normalize(cfg: &mut DeclarativeConfig) {
    for p in &mut cfg.packages {
        normalize_properties(&mut p.properties);
        if let Some(icon) = &mut p.icon {
            icon.base64data = reencode_base64(&icon.base64data);
        }
    }
    for c in &mut cfg.channels {
        normalize_properties(&mut c.properties);
    }
    for b in &mut cfg.bundles {
        normalize_bundle(b);
    }
    for o in &mut cfg.others {
        normalize_value(&mut o.blob);
    }
}

/// opm's ordering and re-encoding of one bundle.
pub fn normalize_bundle(b: &mut Bundle) {
    normalize_properties(&mut b.properties);
    move_objects_last(&mut b.properties);
    crate::gosort::sort_slice(&mut b.related_images, |x, y| x.image < y.image);
}

/// Stable partition: `olm.bundle.object` and `olm.csv.metadata` last.
pub fn move_objects_last(props: &mut Vec<Property>) {
    let is_last = |p: &Property| p.type_ == BUNDLE_OBJECT || p.type_ == CSV_METADATA;
    if !props.iter().any(is_last) {
        return;
    }
    let (rest, last): (Vec<Property>, Vec<Property>) =
        std::mem::take(props).into_iter().partition(|p| !is_last(p));
    props.extend(rest);
    props.extend(last);
}

fn normalize_properties(props: &mut [Property]) {
    for p in props {
        normalize_value(&mut p.value);
    }
}

/// Sorts object keys and turns every number into a `float64`, recursively.
pub fn normalize_value(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let sorted = map.keys().is_sorted();
            if sorted {
                map.values_mut().for_each(normalize_value);
            } else {
                let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                let mut out = Map::with_capacity(entries.len());
                for (k, mut val) in entries {
                    normalize_value(&mut val);
                    out.insert(k, val);
                }
                *map = out;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_value),
        Value::Number(n) if !n.is_f64() => {
            if let Some(f) = n.as_f64().and_then(Number::from_f64) {
                *n = f;
            }
        }
        _ => {}
    }
}

/// Go decodes a `[]byte` field with the standard encoding (ignoring `\r` and `\n`) and
/// encodes it back without line breaks. Undecodable data is left alone (opm fails on it; the
/// validator reports it).
fn reencode_base64(data: &str) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    let clean: String = data.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    match engine.decode(clean.as_bytes()) {
        Ok(bytes) => engine.encode(bytes),
        Err(_) => data.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_sorted_and_floated() {
        let mut v = json!({"z": 1, "a": {"y": 2, "b": [3]}});
        normalize_value(&mut v);
        assert_eq!(v.to_string(), r#"{"a":{"b":[3.0],"y":2.0},"z":1.0}"#);
    }

    #[test]
    fn objects_and_csv_metadata_go_last() {
        let mut props = vec![
            Property::new(BUNDLE_OBJECT, json!(1)),
            Property::new("olm.gvk", json!(2)),
            Property::new(CSV_METADATA, json!(3)),
            Property::new("olm.package", json!(4)),
        ];
        move_objects_last(&mut props);
        let order: Vec<i64> = props.iter().map(|p| p.value.as_i64().unwrap()).collect();
        assert_eq!(order, vec![2, 4, 1, 3]);
    }

    #[test]
    fn icons_are_reencoded() {
        assert_eq!(reencode_base64("aGVsbG8g\nd29ybGQ="), "aGVsbG8gd29ybGQ=");
        assert_eq!(reencode_base64("not base64!"), "not base64!");
    }
}
