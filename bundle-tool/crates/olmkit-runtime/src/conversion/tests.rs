//! The framework over a small three-version resource: errors name what is wrong, an object
//! already in the desired version is copied byte for byte, and every pair of versions round
//! trips (property test).

use super::*;
use kube::CustomResource;
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

pub(crate) mod v1 {
    use super::*;
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "demo.example.com",
        version = "v1",
        kind = "Widget",
        namespaced
    )]
    pub struct WidgetSpec {
        pub replicas: i32,
        #[serde(default)]
        pub colour: String,
    }
}

mod v1beta1 {
    use super::*;
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "demo.example.com",
        version = "v1beta1",
        kind = "Widget",
        namespaced
    )]
    pub struct WidgetSpec {
        pub replicas: i32,
    }
}

mod v1alpha1 {
    use super::*;
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "demo.example.com",
        version = "v1alpha1",
        kind = "Widget",
        namespaced
    )]
    pub struct WidgetSpec {
        pub size: i32,
    }
}

const KEY: &str = "demo.example.com/conversion-data";

#[derive(Serialize, Deserialize, Default)]
struct Lost {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    colour: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotation: Option<String>,
}

impl preserved::Kept for Lost {
    fn is_empty(&self) -> bool {
        self.colour.is_empty()
    }
    fn hub_annotation(&mut self) -> &mut Option<String> {
        &mut self.annotation
    }
}

fn down_meta(
    mut meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    colour: String,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    let hub_annotation = preserved::take_annotation(&mut meta, KEY);
    let kept = Lost {
        colour,
        annotation: None,
    };
    preserved::store(&mut meta, KEY, kept, hub_annotation);
    meta
}

fn up_meta(
    mut meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    Lost,
    Vec<String>,
) {
    let (kept, err): (Lost, _) = preserved::restore(&mut meta, KEY);
    let warnings = err.map(|e| e.to_string()).into_iter().collect();
    (meta, kept, warnings)
}

impl Spoke<v1::Widget> for v1beta1::Widget {
    fn into_hub(self) -> Converted<v1::Widget> {
        let (metadata, kept, warnings) = up_meta(self.metadata);
        Converted {
            object: v1::Widget {
                metadata,
                spec: v1::WidgetSpec {
                    replicas: self.spec.replicas,
                    colour: kept.colour,
                },
            },
            warnings,
        }
    }
    fn from_hub(hub: v1::Widget) -> Self {
        v1beta1::Widget {
            metadata: down_meta(hub.metadata, hub.spec.colour),
            spec: v1beta1::WidgetSpec {
                replicas: hub.spec.replicas,
            },
        }
    }
}

impl Spoke<v1::Widget> for v1alpha1::Widget {
    fn into_hub(self) -> Converted<v1::Widget> {
        let (metadata, kept, warnings) = up_meta(self.metadata);
        Converted {
            object: v1::Widget {
                metadata,
                spec: v1::WidgetSpec {
                    replicas: self.spec.size,
                    colour: kept.colour,
                },
            },
            warnings,
        }
    }
    fn from_hub(hub: v1::Widget) -> Self {
        v1alpha1::Widget {
            metadata: down_meta(hub.metadata, hub.spec.colour),
            spec: v1alpha1::WidgetSpec {
                size: hub.spec.replicas,
            },
        }
    }
}

pub(crate) fn widgets() -> HubAndSpoke<v1::Widget> {
    HubAndSpoke::new()
        .spoke::<v1alpha1::Widget>()
        .spoke::<v1beta1::Widget>()
}

fn err(object: &str, desired: &str) -> String {
    widgets()
        .convert_str(object, desired)
        .map(|c| c.object.into_owned())
        .unwrap_err()
        .to_string()
}

#[test]
fn versions_are_listed_oldest_first_with_the_hub_last() {
    assert_eq!(widgets().versions(), ["v1alpha1", "v1beta1", "v1"]);
    assert_eq!(widgets().group(), "demo.example.com");
    assert_eq!(widgets().kind(), "Widget");
}

#[test]
fn errors_name_the_problem() {
    let good = r#"{"apiVersion":"demo.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":1}}"#;
    assert_eq!(
        err(good, "v1"),
        "apiVersion \"v1\" has no group; expected demo.example.com/<version>"
    );
    assert_eq!(
        err(good, "other.io/v1"),
        "apiVersion \"other.io/v1\" is not in group demo.example.com"
    );
    assert_eq!(
        err(good, "demo.example.com/v2"),
        "apiVersion \"demo.example.com/v2\" is not a served version (v1alpha1, v1beta1, v1)"
    );
    for not_an_object in ["[1]", "0", " \n\"x\"", "null", "", "not json"] {
        assert_eq!(
            err(not_an_object, "demo.example.com/v1"),
            "object is not a JSON object",
            "{not_an_object:?}"
        );
    }
    // JSON's whitespace before an object is still an object.
    let spaced = format!(" \t\r\n{good}");
    let converted = widgets()
        .convert_str(&spaced, "demo.example.com/v1alpha1")
        .unwrap();
    assert!(
        converted.object.contains("v1alpha1"),
        "{}",
        converted.object
    );
    assert_eq!(
        err(r#"{"kind":"Widget"}"#, "demo.example.com/v1"),
        "object has no apiVersion string"
    );
    assert_eq!(
        err(
            r#"{"apiVersion":"demo.example.com/v1","kind":"Gadget"}"#,
            "demo.example.com/v1alpha1"
        ),
        "kind \"Gadget\" is not Widget"
    );
    assert_eq!(
        err(
            r#"{"apiVersion":"demo.example.com/v1","kind":7}"#,
            "demo.example.com/v1alpha1"
        ),
        "kind \"\" is not Widget"
    );
    let malformed = err(
        r#"{"apiVersion":"demo.example.com/v1alpha1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":"x"}}"#,
        "demo.example.com/v1",
    );
    assert!(
        malformed.starts_with("not a valid demo.example.com/v1alpha1 Widget: invalid type"),
        "{malformed}"
    );
}

#[test]
fn an_object_in_the_desired_version_is_copied_byte_for_byte() {
    let text = r#"{ "apiVersion":"demo.example.com/v1beta1", "kind":"Widget", "zzz":1 }"#;
    let out = widgets()
        .convert_str(text, "demo.example.com/v1beta1")
        .unwrap();
    assert!(matches!(out.object, Cow::Borrowed(t) if t == text));
}

#[test]
fn an_unreadable_annotation_is_a_warning_and_stays() {
    let text = r#"{"apiVersion":"demo.example.com/v1alpha1","kind":"Widget","metadata":{"name":"w","annotations":{"demo.example.com/conversion-data":"{oops"}},"spec":{"size":2}}"#;
    let out = widgets().convert_str(text, "demo.example.com/v1").unwrap();
    assert_eq!(out.warnings.len(), 1);
    let hub: v1::Widget = serde_json::from_str(&out.object).unwrap();
    assert_eq!(
        hub.metadata
            .annotations
            .unwrap()
            .get(KEY)
            .map(String::as_str),
        Some("{oops")
    );
}

#[test]
#[should_panic(expected = "listed twice")]
fn a_version_listed_twice_is_a_programming_error() {
    let _ = widgets().spoke::<v1beta1::Widget>();
}

fn hub_strategy() -> impl Strategy<Value = v1::Widget> {
    (
        0..1000i32,
        "[a-z]{0,6}",
        proptest::option::of("[ -~]{0,12}"),
    )
        .prop_map(|(replicas, colour, user_annotation)| {
            let mut w = v1::Widget::new("w", v1::WidgetSpec { replicas, colour });
            if let Some(a) = user_annotation {
                w.metadata.annotations = Some([(KEY.to_string(), a)].into());
            }
            w
        })
}

proptest! {
    /// Hub -> any version -> any other version -> hub gives the hub object back.
    #[test]
    fn every_path_through_the_versions_round_trips(
        hub in hub_strategy(),
        a in 0..3usize,
        b in 0..3usize,
    ) {
        let c = widgets();
        let versions = c.versions();
        let api = |v: &str| format!("demo.example.com/{v}");
        let text = serde_json::to_string(&hub).unwrap();
        let x = c.convert_str(&text, &api(versions[a])).unwrap().object.into_owned();
        let y = c.convert_str(&x, &api(versions[b])).unwrap().object.into_owned();
        let back = c.convert_str(&y, "demo.example.com/v1").unwrap().object.into_owned();
        let back: serde_json::Value = serde_json::from_str(&back).unwrap();
        prop_assert_eq!(back, serde_json::to_value(&hub).unwrap());
    }
}
