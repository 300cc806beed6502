//! Property test of the opm-compatible YAML writer: whatever it writes parses back to the same
//! JSON (strings, numbers, booleans, nulls, nested maps and lists), through the YAML reader the
//! rest of bundle-tool uses.
#![allow(clippy::unwrap_used)]

use olmkit_catalog::declcfg::{WriteFormat, write::write_blob};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Strings with YAML's awkward characters: indicators, quotes, spaces, line breaks, tabs,
/// non-ASCII and non-BMP characters, version- and number-like text.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9 .:#'\"&*!|>%@`,?\\[\\]{}-]{0,40}",
        // Not U+2028/U+2029: go-yaml writes them raw as YAML 1.1 line breaks, which the YAML
        // 1.2 reader used here reads as ordinary characters.
        "[ a-zA-Z\n\r\t\u{e9}\u{1F600}]{0,120}",
        Just("1.3.0".to_string()),
        Just("yes".to_string()),
        Just("0x1F".to_string()),
        Just("12:30:45".to_string()),
        Just(String::new()),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e30f64..1e30).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// Numbers compare by value (YAML has no int/float distinction worth keeping here).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn yaml_parses_back_to_the_same_json(value in json()) {
        let doc = Value::Object(Map::from_iter([("v".to_string(), value)]));
        let mut buf = Vec::new();
        write_blob(&mut buf, &doc, WriteFormat::Yaml).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let back = olmkit_core::docs::parse_documents("yaml", text.as_bytes()).unwrap();
        prop_assert_eq!(back.len(), 1, "{}", text);
        prop_assert!(same(&back[0], &doc), "{}\nparsed: {}\nwant: {}", text, back[0], doc);
    }
}
