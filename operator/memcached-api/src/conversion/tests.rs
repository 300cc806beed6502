//! Laws of the conversion (property tests) and its edge cases (examples).

use proptest::prelude::*;
use serde_json::{Value, json};

use super::strategies::*;
use super::*;
use crate::{CONVERSION_ANNOTATION, v1, v1alpha1, v1beta1};

fn json_of(o: &AnyMemcached) -> Value {
    o.to_json().expect("encodes")
}

fn annotation(v: &Value) -> Option<&str> {
    v.pointer("/metadata/annotations")
        .and_then(|a| a.get(CONVERSION_ANNOTATION))
        .and_then(Value::as_str)
}

fn round_trip(object: AnyMemcached, via: Version) -> Result<(), TestCaseError> {
    let before = json_of(&object);
    let origin = object.version();
    let there = object.convert(via);
    prop_assert!(there.warnings.is_empty(), "{:?}", there.warnings);
    prop_assert_eq!(there.object.version(), via);
    let back = there.object.convert(origin);
    prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
    prop_assert_eq!(json_of(&back.object), before);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_pair_round_trips(object in any_object(), via in prop::sample::select(Version::ALL.to_vec())) {
        round_trip(object, via)?;
    }

    #[test]
    fn same_version_is_identity(object in any_object()) {
        let before = json_of(&object);
        let v = object.version();
        let same = object.convert(v);
        prop_assert!(same.warnings.is_empty());
        prop_assert_eq!(json_of(&same.object), before);
    }

    #[test]
    fn hub_law_spoke_to_hub_and_back(object in prop_oneof![
        v1alpha1_object().prop_map(AnyMemcached::from),
        v1beta1_object().prop_map(AnyMemcached::from),
    ]) {
        let before = json_of(&object);
        let v = object.version();
        let hub = object.into_hub();
        prop_assert!(hub.warnings.is_empty());
        let back = AnyMemcached::from_hub(hub.object, v);
        prop_assert_eq!(json_of(&back), before);
    }

    #[test]
    fn hub_law_hub_to_spoke_and_back(hub in v1_object(), v in prop_oneof![Just(Version::V1alpha1), Just(Version::V1beta1)]) {
        let before = serde_json::to_value(&hub).expect("encodes");
        let back = AnyMemcached::from_hub(hub, v).into_hub();
        prop_assert!(back.warnings.is_empty());
        prop_assert_eq!(serde_json::to_value(&back.object).expect("encodes"), before);
    }

    /// Objects written by a spoke client lose nothing on the way to v1, so the annotation stays
    /// absent both in v1 and when they come back.
    #[test]
    fn spoke_objects_gain_no_annotation(object in prop_oneof![
        v1alpha1_object().prop_map(AnyMemcached::from),
        v1beta1_object().prop_map(AnyMemcached::from),
    ]) {
        let hub = json_of(&object.convert(Version::V1).object);
        prop_assert_eq!(annotation(&hub), None);
    }

    /// The text entry point agrees with the Value one.
    #[test]
    fn text_conversion_matches_value_conversion(object in any_object(), to in prop::sample::select(Version::ALL.to_vec())) {
        let input = json_of(&object);
        let text = serde_json::to_string(&input).expect("encodes");
        let via_text = convert_json_str(&text, to).expect("converts");
        let via_value = convert_json(input, to).expect("converts");
        let parsed: Value = serde_json::from_str(&via_text.object).expect("JSON");
        prop_assert_eq!(parsed, via_value.object);
        prop_assert_eq!(via_text.warnings, via_value.warnings);
    }

    /// The JSON entry point agrees with the typed one and keeps apiVersion and metadata right.
    #[test]
    fn json_conversion_matches_typed(object in any_object(), to in prop::sample::select(Version::ALL.to_vec())) {
        let input = json_of(&object);
        let typed = json_of(&object.clone().convert(to).object);
        let converted = convert_json(input.clone(), to).expect("converts");
        prop_assert_eq!(&converted.object, &typed);
        prop_assert_eq!(converted.object["apiVersion"].as_str(), Some(to.api_version()));
        prop_assert_eq!(&converted.object["kind"], &input["kind"]);
        for key in ["name", "namespace", "uid", "resourceVersion", "generation", "labels", "finalizers", "creationTimestamp"] {
            prop_assert_eq!(&converted.object["metadata"].get(key), &input["metadata"].get(key), "{}", key);
        }
    }
}

fn hub_with(spec: v1::MemcachedSpec, status: Option<v1::MemcachedStatus>) -> v1::Memcached {
    let mut hub = v1::Memcached::new("cache", spec);
    hub.metadata.namespace = Some("ns".into());
    hub.status = status;
    hub
}

#[test]
fn defaults_lose_nothing_and_add_no_annotation() {
    let hub = hub_with(v1::MemcachedSpec::default(), Some(Default::default()));
    let alpha = v1_to_v1alpha1(hub.clone());
    assert_eq!(alpha.metadata.annotations, None);
    assert_eq!(alpha.spec.size, 1);
    let beta = v1_to_v1beta1(hub);
    assert_eq!(beta.metadata.annotations, None);
}

#[test]
fn v1_only_fields_are_kept_in_the_v1_shape() {
    let mut spec = v1::MemcachedSpec {
        replicas: 3,
        port: 11300,
        ..Default::default()
    };
    spec.memcached.threads = 8;
    let status = v1::MemcachedStatus {
        selector: Some("app=x".into()),
        ready_replicas: Some(2),
        ..Default::default()
    };
    let beta = v1_to_v1beta1(hub_with(spec.clone(), Some(status.clone())));
    let kept = beta
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONVERSION_ANNOTATION))
        .expect("annotation");
    // readyReplicas is native to v1beta1, so it is not kept.
    assert_eq!(
        kept,
        r#"{"spec":{"memcached":{"threads":8},"port":11300},"status":{"selector":"app=x"}}"#
    );
    let hub = v1beta1_to_v1(beta).object;
    assert_eq!(hub.spec, spec);
    assert_eq!(hub.status, Some(status));
    assert_eq!(hub.metadata.annotations, None);
}

#[test]
fn other_annotations_survive_and_ours_is_removed_on_the_way_up() {
    let mut hub = hub_with(
        v1::MemcachedSpec {
            image: "quay.io/x/memcached:1".into(),
            ..Default::default()
        },
        None,
    );
    hub.metadata.annotations = Some([("team".to_string(), "a".to_string())].into());
    let alpha = v1_to_v1alpha1(hub);
    let annotations = alpha.metadata.annotations.clone().expect("annotations");
    assert_eq!(annotations.len(), 2);
    let back = v1alpha1_to_v1(alpha).object;
    assert_eq!(
        back.metadata.annotations,
        Some([("team".to_string(), "a".to_string())].into())
    );
    assert_eq!(back.spec.image, "quay.io/x/memcached:1");
}

#[test]
fn unreadable_annotation_falls_back_with_a_warning_and_is_kept() {
    let mut alpha = v1alpha1::Memcached::new("cache", v1alpha1::MemcachedSpec { size: 2 });
    alpha.metadata.annotations =
        Some([(CONVERSION_ANNOTATION.to_string(), "{not json".to_string())].into());
    let hub = v1alpha1_to_v1(alpha.clone());
    assert_eq!(hub.warnings.len(), 1, "{:?}", hub.warnings);
    assert!(hub.warnings[0].to_string().contains(CONVERSION_ANNOTATION));
    assert_eq!(hub.object.spec.replicas, 2);
    assert_eq!(hub.object.spec.port, crate::DEFAULT_PORT);
    // The value is kept on v1; the way down wraps it, and from then on it round-trips without
    // further warnings.
    assert_eq!(hub.object.metadata.annotations, alpha.metadata.annotations);
    let again = v1_to_v1alpha1(hub.object);
    let hub_again = v1alpha1_to_v1(again.clone());
    assert!(hub_again.warnings.is_empty());
    assert_eq!(
        hub_again.object.metadata.annotations,
        alpha.metadata.annotations
    );
}

#[test]
fn annotation_of_a_foreign_shape_is_not_ours() {
    let mut beta = v1beta1::Memcached::new(
        "cache",
        v1beta1::MemcachedSpec {
            replicas: 1,
            image: v1::default_image(),
            memory_limit_mib: 64,
        },
    );
    beta.metadata.annotations = Some(
        [(
            CONVERSION_ANNOTATION.to_string(),
            r#"{"spec":{"port":1},"owner":"me"}"#.to_string(),
        )]
        .into(),
    );
    let hub = v1beta1_to_v1(beta);
    assert_eq!(hub.warnings.len(), 1);
    assert_eq!(hub.object.spec.port, crate::DEFAULT_PORT);
}

#[test]
fn native_fields_win_over_the_annotation() {
    let mut beta = v1beta1::Memcached::new(
        "cache",
        v1beta1::MemcachedSpec {
            replicas: 4,
            image: "quay.io/native/memcached:1".into(),
            memory_limit_mib: 128,
        },
    );
    beta.metadata.annotations = Some(
        [(
            CONVERSION_ANNOTATION.to_string(),
            r#"{"spec":{"image":"quay.io/stale/memcached:0","memcached":{"memoryLimitMiB":64,"threads":2}}}"#
                .to_string(),
        )]
        .into(),
    );
    let hub = v1beta1_to_v1(beta).object;
    assert_eq!(hub.spec.image, "quay.io/native/memcached:1");
    assert_eq!(hub.spec.memcached.memory_limit_mib, 128);
    assert_eq!(hub.spec.memcached.threads, 2);
}

#[test]
fn a_users_value_of_our_annotation_on_v1_survives() {
    for value in ["mine", "{}", r#"{"spec":{"port":5}}"#] {
        let mut hub = hub_with(v1::MemcachedSpec::default(), None);
        hub.metadata.annotations =
            Some([(CONVERSION_ANNOTATION.to_string(), value.to_string())].into());
        for spoke in [Version::V1alpha1, Version::V1beta1] {
            let back = AnyMemcached::from_hub(hub.clone(), spoke).into_hub();
            assert!(back.warnings.is_empty(), "{value}: {:?}", back.warnings);
            assert_eq!(
                back.object.metadata.annotations, hub.metadata.annotations,
                "{value}"
            );
            assert_eq!(back.object.spec, hub.spec, "{value}");
        }
    }
}

#[test]
fn size_outside_the_schema_bounds_is_carried_not_clamped() {
    for size in [-1, 0, 1000, 1001, i32::MAX] {
        let alpha = v1alpha1::Memcached::new("cache", v1alpha1::MemcachedSpec { size });
        let hub = v1alpha1_to_v1(alpha).object;
        assert_eq!(hub.spec.replicas, size);
        assert_eq!(v1_to_v1alpha1(hub).spec.size, size);
    }
}

#[test]
fn statuses_convert() {
    let alpha = v1alpha1::Memcached {
        metadata: Default::default(),
        spec: v1alpha1::MemcachedSpec { size: 1 },
        status: Some(v1alpha1::MemcachedStatus {
            nodes: vec!["a".into(), "b".into()],
        }),
    };
    let hub = v1alpha1_to_v1(alpha).object;
    assert_eq!(
        hub.status.as_ref().map(|s| s.nodes.clone()),
        Some(vec!["a".to_string(), "b".to_string()])
    );
    let beta = v1_to_v1beta1(hub);
    assert_eq!(beta.status.map(|s| s.nodes.len()), Some(2));
}

#[test]
fn json_errors_name_the_problem() {
    let cases = [
        (json!([1]), "not a JSON object"),
        (json!({"kind": "Memcached"}), "no apiVersion"),
        (
            json!({"apiVersion": "apps/v1", "kind": "Memcached"}),
            "not in group cache.example.com",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Memcached"}),
            "has no group",
        ),
        (
            json!({"apiVersion": "cache.example.com/v2", "kind": "Memcached"}),
            "not a served version",
        ),
        (
            json!({"apiVersion": "cache.example.com/v1", "kind": "Redis"}),
            "kind \"Redis\" is not Memcached",
        ),
        (
            json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {}, "spec": {"size": "three"}}),
            "not a valid cache.example.com/v1alpha1 Memcached",
        ),
        (
            json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {}, "spec": {}}),
            "missing field `size`",
        ),
    ];
    for (object, expected) in cases {
        let err = convert_json(object.clone(), Version::V1).expect_err("fails");
        assert!(
            err.to_string().contains(expected),
            "{object}: {err} should contain {expected}"
        );
    }
}

#[test]
fn text_errors_match_value_errors() {
    let cases = [
        "[1]",
        "\"x\"",
        r#"{"kind": "Memcached"}"#,
        r#"{"apiVersion": 5, "kind": "Memcached"}"#,
        r#"{"apiVersion": "apps/v1", "kind": "Memcached"}"#,
        r#"{"apiVersion": "cache.example.com/v2", "kind": "Memcached"}"#,
        r#"{"apiVersion": "cache.example.com/v1", "kind": "Redis"}"#,
        r#"{"apiVersion": "cache.example.com/v1", "kind": 7}"#,
        r#"{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {}, "spec": {"size": "three"}}"#,
    ];
    for text in cases {
        let value: Value = serde_json::from_str(text).expect("JSON");
        let by_value = convert_json(value, Version::V1)
            .expect_err("fails")
            .to_string();
        let by_text = convert_json_str(text, Version::V1)
            .expect_err("fails")
            .to_string();
        // serde reports positions only for text input; compare the message before them.
        let strip = |s: &str| s.split(" at line ").next().unwrap_or_default().to_string();
        assert_eq!(strip(&by_text), strip(&by_value), "{text}");
    }
}

#[test]
fn same_version_json_is_returned_untouched() {
    let object = json!({"apiVersion": "cache.example.com/v1", "kind": "Memcached", "metadata": {"name": "x"}, "spec": {}, "extra": 1});
    let out = convert_json(object.clone(), Version::V1).expect("converts");
    assert_eq!(out.object, object);
}

#[test]
fn defaults_are_filled_like_the_api_server_does() {
    // An object the API server defaulted and one that omits the defaulted fields convert alike.
    let sparse = json!({"apiVersion": "cache.example.com/v1beta1", "kind": "Memcached", "metadata": {"name": "x"}, "spec": {}});
    let hub = convert_json(sparse, Version::V1).expect("converts").object;
    assert_eq!(hub["spec"]["replicas"], 1);
    assert_eq!(hub["spec"]["image"], crate::DEFAULT_IMAGE);
    assert_eq!(hub["spec"]["memcached"]["memoryLimitMiB"], 64);
}

#[test]
fn version_parsing() {
    assert_eq!(
        Version::from_api_version("cache.example.com/v1beta1"),
        Ok(Version::V1beta1)
    );
    for v in Version::ALL {
        assert_eq!(Version::from_api_version(v.api_version()), Ok(v));
        assert_eq!(v.as_str().parse::<Version>(), Ok(v));
    }
    assert!(Version::from_api_version("cache.example.com/").is_err());
}
